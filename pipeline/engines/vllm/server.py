"""A server subprocess on loopback that never outlives its owner.

Started in its own session (process group); stopped with SIGTERM to the whole group, then SIGKILL
after a grace period - on success, error, timeout and Ctrl-C alike (stop() runs in `finally`).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerDied(RuntimeError):
    pass


def auth_headers(api_key: str | None) -> dict[str, str]:
    """JSON content type, and the bearer token when the server takes one."""
    return {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}


def _complete(base_url: str, body: dict, timeout_s: float, api_key: str | None = None) -> tuple[bytes, float]:
    """(the server's raw answer, seconds) for one /v1/completions request; TimeoutError past timeout_s."""
    req = urllib.request.Request(f"{base_url}/v1/completions", data=json.dumps(body).encode(),
                                 headers=auth_headers(api_key))
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            raw = r.read()
    except (TimeoutError, socket.timeout):
        raise TimeoutError(f"no answer in {timeout_s:.0f} s") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, (TimeoutError, socket.timeout)):
            raise TimeoutError(f"no answer in {timeout_s:.0f} s") from None
        raise
    return raw, time.monotonic() - t0


def first_completion(base_url: str, model: str, timeout_s: float, api_key: str | None = None) -> float:
    """Seconds for one 1-token completion: proof that the engine can run this model at a usable
    speed. TimeoutError when it does not answer within timeout_s."""
    body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
    return _complete(base_url, body, timeout_s, api_key)[1]


class NoTokenCount(ValueError):
    """The server's answer does not say how many tokens it decoded."""


def completion_tokens(raw: bytes | str) -> int:
    """usage.completion_tokens of a /v1/completions answer. NoTokenCount when the answer lacks it:
    never taken to be max_tokens, which would count an answer cut short as all tokens decoded."""
    try:
        answer = json.loads(raw)
    except ValueError:
        raise NoTokenCount("the server's answer is not JSON, so its decoded token count is unknown") from None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    done = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(done, bool) or not isinstance(done, int) or done < 0:
        raise NoTokenCount("the server's answer has no usage.completion_tokens, so its decoded token count "
                           "is unknown")
    return done


def decode_speed(base_url: str, model: str, tokens: int, timeout_s: float, api_key: str | None = None) -> float:
    """Tokens/s of one greedy `tokens`-token completion (EOS ignored, so it decodes them all): the
    variant's single-stream decode speed, measured in seconds, from the tokens the server says it
    decoded. TimeoutError past timeout_s; NoTokenCount when the answer does not say."""
    body = {"model": model, "prompt": "Hello", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    raw, seconds = _complete(base_url, body, timeout_s, api_key)
    return completion_tokens(raw) / max(seconds, 1e-6)


def parse_prompt_logprobs(raw: bytes | str, k: int):
    """(ids [n-1, k+1], log-probs [n-1, k+1], top1 [n-1]) from a completion asked for `prompt_logprobs`:
    vLLM answers, per prompt position after the first, {token id: {"logprob", "rank", ...}} holding its
    top k and the prompt's own token. Rows are sorted by log-prob and padded with id -1."""
    import numpy as np  # lazy: the probe helpers above do not need it

    rows = json.loads(raw)["choices"][0]["prompt_logprobs"][1:]
    ids = np.full((len(rows), k + 1), -1, dtype=np.int64)
    lps = np.full((len(rows), k + 1), -np.inf, dtype=np.float32)
    for t, row in enumerate(rows):
        entries = sorted(((float(v["logprob"]), int(tok)) for tok, v in (row or {}).items()), reverse=True)
        for j, (lp, tok) in enumerate(entries[: k + 1]):
            ids[t, j], lps[t, j] = tok, lp
    return ids, lps, ids[:, 0].copy()


def prompt_logprobs(base_url: str, model: str, ids: list[int], k: int, timeout_s: float, api_key: str | None = None):
    """The server's top-k next-token log-probs at every position of a token-id prompt (one request;
    `prompt_logprobs` is vLLM's extension of the completions API)."""
    body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": k}
    return parse_prompt_logprobs(_complete(base_url, body, timeout_s, api_key)[0], k)


class Server:
    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, port: int, health: str = "/health"):
        # health: the path answering 200 once the model is loaded (llama-cpp-python's server has no /health)
        self.argv, self.env, self.log_path, self.port, self.health = argv, env, log_path, port, health
        self.proc: subprocess.Popen | None = None

    api_key = None          # qtier's own server takes none

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait_healthy(self, timeout_s: float, poll_s: float = 0.25) -> float:
        """Seconds until GET <health> answers 200; ServerDied if the process exits first,
        TimeoutError after timeout_s."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if not self.alive():
                raise ServerDied(f"server exited with code {self.proc.returncode} during startup")
            try:
                with urllib.request.urlopen(f"{self.base_url}{self.health}", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - t0
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(poll_s)
        raise TimeoutError(f"server not healthy after {timeout_s:.0f} s")

    def stop(self, grace_s: float = 20.0) -> None:
        if self.proc is None:
            return
        pgid = self.proc.pid   # start_new_session: the group id is the leader's pid
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(pgid):
                break
        self._log.close()
        self.proc = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
