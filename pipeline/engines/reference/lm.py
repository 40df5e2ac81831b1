"""lm-eval's model class for the reference backend: HFLM with qtier's generation, log-likelihood and
tokenization (used by pipeline/engines/reference/backend.py; tests/test_generate.py, test_loglik.py)."""
from __future__ import annotations

from pipeline.domain.model import bos
from pipeline.engines.reference import generate, loglik


def on_cpu(model) -> bool:
    return model.device.type == "cpu"


def reference_lm_class(add_bos: bool):
    """lm-eval's HFLM with the generation of pipeline/engines/reference/generate.py and the log-likelihood
    path of pipeline/engines/reference/loglik.py, on the CPU (they build their batches there); on a GPU, HFLM's own.
    Every prompt is tokenized by domain/model/bos.encode with the model's resolved add_bos_token, as the vLLM
    and endpoint backends tokenize theirs (HFLM's own would follow the tokenizer's post-processor)."""
    import torch  # lazy, as below
    from lm_eval.models.huggingface import HFLM  # lazy: lm-eval imports take seconds

    class ReferenceLM(HFLM):
        # The prompt prefix a batch shares runs once and is attended from the cache, as vLLM's prefix
        # caching runs it, for every checkpoint. With W8A8's exact GEMMs this is as valid as scoring each
        # input whole: on the default model's 640 classification samples (bfloat16, AVX512-BF16), the two
        # paths flipped 31 (int8) and 32 (fp8) predictions, balanced in direction (accuracy +0.2 and +0.3
        # shared), against 9 for fp16; sharing ran W8A8 classification 2.9-3.6x faster. (The earlier
        # fake quantization shifted accuracy -6 points, all one way, and was scored whole.)
        qtier_share_prefix = True

        def tok_encode(self, string, add_special_tokens=None, left_truncate_len=None, **kwargs):
            # an explicit False is lm-eval asking for a bare continuation (seq2seq, empty context)
            ids = bos.encode(self.tokenizer, string, add_bos and add_special_tokens is not False)
            return ids[-left_truncate_len:] if left_truncate_len else ids

        def tok_batch_encode(self, strings, padding_side="left", left_truncate_len=None, truncation=False):
            encs = [self.tok_encode(s, left_truncate_len=left_truncate_len) for s in strings]
            old, self.tokenizer.padding_side = self.tokenizer.padding_side, padding_side
            try:
                batch = self.tokenizer.pad({"input_ids": encs}, padding="longest", return_tensors="pt")
            finally:
                self.tokenizer.padding_side = old
            return batch["input_ids"], batch["attention_mask"]

        def _model_generate(self, context, max_length, stop, **kwargs):
            if self.backend != "causal" or not on_cpu(self.model) or not generate.plain_greedy(self.model, kwargs):
                return super()._model_generate(context, max_length, stop, **kwargs)
            mask = kwargs.get("attention_mask")
            if mask is None:
                mask = torch.ones_like(context)
            return generate.greedy(self.model, self.tokenizer, context, mask, max_length, stop,
                                   self.tokenizer.pad_token_id)

        def _loglikelihood_tokens(self, requests, disable_tqdm=False, override_bs=None):
            if self.backend != "causal" or not on_cpu(self.model) or not loglik.supported(self.model):
                return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
            return loglik.score(self.model, requests, self.max_length, int(self.batch_size),
                                share_prefix=self.qtier_share_prefix)

    return ReferenceLM
