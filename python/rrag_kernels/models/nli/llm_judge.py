"""LLMJudgeNLI: an LLM behind any OpenAI-compatible chat endpoint, asked for the NLI label.

Design
------
* **One question per pair.** A fixed instruction (:data:`JUDGE_INSTRUCTION`) and the pair
  (:data:`JUDGE_TEMPLATE`) ask for exactly one word: entailment, neutral or contradiction.
  Greedy decoding (``temperature=0``), a few tokens (``max_tokens``, default 8).
* **Probabilities from log-probabilities** (``label_from="logprobs"``, the default). The
  request asks for ``top_logprobs`` alternatives per token. At the first generated token
  that holds a letter (normally the first token; a leading ``**``, quote or space is
  skipped), every alternative is mapped to a label by prefix (:func:`token_label`:
  stripped of spaces and punctuation, lower-cased, a prefix of two letters or more of a
  label name or starting with one: ``"En"``, ``" neutral"``, ``"contr"``). The probabilities of the
  alternatives of each label are summed; a label with no alternative in the list gets
  ``min(floor, p_min)`` (``p_min`` the smallest probability listed: a token that was not
  listed is at most that likely); the three are then divided by their sum. When no
  alternative there names a label (the model began with "The ..."), the reply's text is
  read instead, as below.
* **Probabilities from the text** (``label_from="text"``, for servers without
  log-probabilities). The first word of the reply starting with ``entail``, ``neutral`` or
  ``contradict`` (any case) is the label, with probability ``text_confidence`` (default
  0.9) and ``(1 - text_confidence) / 2`` for each other label. A reply that names none is
  read as neutral (same smoothing), logged at WARNING and counted in ``stats["unparseable"]``.
  ``label_from="auto"`` uses log-probabilities when a reply carries them and the text when
  it does not (logged once).
* **Asked once.** Pairs (after :func:`rrag_kernels.models.clean_text`) are cached in an
  LRU map ``(premise, hypothesis) -> row`` of ``cache_size`` entries; repeated pairs
  within one call are asked once. Concurrent :meth:`LLMJudgeNLI.predict_proba` calls share
  the cache (under a lock) but may ask a pair that both are missing twice.
* **Concurrent.** The distinct uncached pairs are sent from a pool of ``max_concurrency``
  threads; the rows come back in input order. A failed request (:class:`LLMError` after the
  client's retries) cancels the requests not yet sent and is raised; the rows already
  answered stay cached.
"""

from __future__ import annotations

import math
import re
import string
import threading
from collections import OrderedDict
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from ...ops import check_int, check_real
from ..llm import LLMError, OpenAIChatLLM
from ..llm.types import MAX_TOP_LOGPROBS
from ._common import LABELS, check_pairs, empty_probs, logger

__all__ = ["JUDGE_INSTRUCTION", "JUDGE_TEMPLATE", "LLMJudgeNLI", "token_label"]

#: The system message of every request.
JUDGE_INSTRUCTION = (
    "You are a natural language inference judge. Given a premise and a hypothesis, decide whether the "
    "premise entails the hypothesis (it must be true), contradicts it (it must be false), or is neutral "
    "(neither). Answer with exactly one word: entailment, neutral or contradiction."
)
#: The user message; ``{premise}`` and ``{hypothesis}`` are filled in.
JUDGE_TEMPLATE = "Premise: {premise}\nHypothesis: {hypothesis}\nAnswer (entailment, neutral or contradiction):"

_LABEL_FROM = ("logprobs", "text", "auto")
_STRIP = string.whitespace + string.punctuation + "\u2581\u0120\u010a"  # SentencePiece / byte-BPE space marks
_WORD = re.compile(r"(entail|neutral|contradict)\w*", re.IGNORECASE)
_STEM_LABEL = {"entail": 0, "neutral": 1, "contradict": 2}


def token_label(token: str) -> int | None:
    """The label column a token names, by prefix, or None.

    Parameters
    ----------
    token : str
        One token's text (``" Ent"``, ``"neutral"``, ``"**Contr"``).

    Returns
    -------
    int or None
        The index into :data:`LABELS` (0 entailment, 1 neutral, 2 contradiction) when the
        token, stripped of spaces and punctuation and lower-cased, is a prefix of at least
        two letters of that label's name or starts with it; None otherwise (``"The"``,
        ``"no"``, ``"**"``, a single letter such as ``"C"``).
        The three names start with different letters, so at most one label matches.
    """
    word = token.strip(_STRIP).lower()
    if len(word) < 2:  # "C", "E", "N" are as likely the letters of a lettered list
        return None
    for k, name in enumerate(LABELS):
        if name.startswith(word) or word.startswith(name):
            return k
    return None


def _text_label(text: str) -> int | None:
    """The label the first ``entail*`` / ``neutral*`` / ``contradict*`` word names, or None."""
    m = _WORD.search(text)
    return None if m is None else _STEM_LABEL[m.group(1).lower()]


class LLMJudgeNLI:
    """NLI by asking an LLM for the label, over any OpenAI-compatible chat endpoint.

    Each distinct (premise, hypothesis) pair is one chat request (see the module's Design
    notes for the prompt, the label mapping, the cache and the concurrency).

    Parameters
    ----------
    base_url : str, optional
        The server, as for :class:`~rrag_kernels.models.OpenAIChatLLM`
        (``"http://127.0.0.1:8080/v1"``, ``"https://api.openai.com/v1"``). Give this or
        ``llm``, not both.
    model : str, optional
        The model name sent in each request (llama.cpp ignores it).
    api_key : str, optional
        Bearer token; default: the ``OPENAI_API_KEY`` environment variable, if set.
    llm : LLM, optional
        An existing client instead of ``base_url``: an :class:`OpenAIChatLLM` (or any object
        with the :class:`~rrag_kernels.models.LLM` ``chat`` method, e.g. ``EmbeddedLLM``).
    label_from : {"logprobs", "text", "auto"}
        Where the probabilities come from: the first answer token's log-probabilities
        (default; a server that returns none raises :class:`LLMError`), the reply's word
        (smoothed one-hot), or log-probabilities when a reply has them and the word when not.
    max_concurrency : int >= 1
        Requests in flight at once (threads of one :meth:`predict_proba` call). Also the
        client's own limit when this object builds it from ``base_url``.
    cache_size : int >= 0
        Pairs kept in the LRU cache (0: none kept between calls).
    max_tokens : int >= 1
        Tokens generated per request.
    top_logprobs : int in [1, 20]
        Alternatives asked per token (``label_from`` "logprobs" or "auto").
    floor : float in (0, 1)
        Probability of a label none of whose tokens is among the listed alternatives,
        before normalisation (capped at the smallest listed probability).
    text_confidence : float in [1/3, 1]
        Probability of the named label when it is read from the text.
    **client_kwargs
        More :class:`OpenAIChatLLM` arguments (``read_timeout``, ``max_retries``, ...);
        only with ``base_url``.

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
    llm : LLM
        The client the requests go through.
    stats : dict
        Counters since construction (a copy): ``requests`` (chat calls made),
        ``cache_hits`` (pairs answered from the cache, repeats within a call included),
        ``from_logprobs``, ``from_text`` (where each answered row came from),
        ``unparseable`` (replies read as neutral because they named no label).

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (named), or neither / both of ``base_url`` and ``llm``.

    Notes
    -----
    The paper's NLI judge is DeBERTa-large fine-tuned on MNLI, a cross-encoder rather than a
    chat LLM; with sentence-transformers installed and the model cached (or the hub
    reachable) it is ``CrossEncoderNLI("microsoft/deberta-large-mnli", batch_size=16,
    max_length=512)`` (or ``nli.load("microsoft/deberta-large-mnli")``; the columns are
    permuted from the model's ``id2label``). ``"cross-encoder/nli-deberta-v3-large"`` is a
    newer drop-in of the same shape.

    Examples
    --------
    >>> judge = LLMJudgeNLI("http://127.0.0.1:8080/v1", model="qwen2.5-7b-instruct")  # doctest: +SKIP
    >>> judge.predict_proba(["Paris is in France."], ["Paris is in Spain."])  # doctest: +SKIP
    array([[0.002, 0.011, 0.987]], dtype=float32)
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(self, base_url: str | None = None, model: str | None = None, *, api_key: str | None = None,
                 llm: Any = None, label_from: str = "logprobs", max_concurrency: int = 4, cache_size: int = 4096,
                 max_tokens: int = 8, top_logprobs: int = MAX_TOP_LOGPROBS, floor: float = 1e-4,
                 text_confidence: float = 0.9, **client_kwargs: Any) -> None:
        self.max_concurrency = check_int(max_concurrency, "max_concurrency", minimum=1)
        self.cache_size = check_int(cache_size, "cache_size", minimum=0)
        self.max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        self.top_logprobs = check_int(top_logprobs, "top_logprobs", minimum=1, maximum=MAX_TOP_LOGPROBS)
        if not isinstance(label_from, str):
            raise TypeError(f"label_from: expected a str, got {type(label_from).__name__}")
        if label_from not in _LABEL_FROM:
            raise ValueError(f"label_from: expected one of {_LABEL_FROM}, got {label_from!r}")
        self.label_from = label_from
        self.floor = check_real(floor, "floor")
        if not 0.0 < self.floor < 1.0:
            raise ValueError(f"floor: must be in (0, 1), got {self.floor}")
        self.text_confidence = check_real(text_confidence, "text_confidence")
        if not 1.0 / 3.0 <= self.text_confidence <= 1.0:
            raise ValueError(f"text_confidence: must be in [1/3, 1], got {self.text_confidence}")
        if llm is not None:
            if base_url is not None or model is not None or api_key is not None or client_kwargs:
                raise TypeError("llm: give either llm or base_url (with model, api_key and client arguments), "
                                "not both")
            if not callable(getattr(llm, "chat", None)):
                raise TypeError(f"llm: expected an object with a chat(messages, ...) method, got "
                                f"{type(llm).__name__}")
            self.llm = llm
        elif base_url is None:
            raise TypeError("base_url: give the server's base URL (e.g. 'http://127.0.0.1:8080/v1') or llm=")
        else:
            client_kwargs.setdefault("max_concurrency", self.max_concurrency)
            self.llm = OpenAIChatLLM(base_url, model, api_key=api_key, **client_kwargs)
        self._server = getattr(self.llm, "url", None) or getattr(self.llm, "base_url", None) or repr(self.llm)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._counts = {"requests": 0, "cache_hits": 0, "from_logprobs": 0, "from_text": 0, "unparseable": 0}
        self._warned_auto = False
        rest = (1.0 - self.text_confidence) / 2.0
        self._text_rows = np.full((3, 3), rest, dtype=np.float64)
        np.fill_diagonal(self._text_rows, self.text_confidence)

    def __repr__(self) -> str:
        return (f"LLMJudgeNLI({self.llm!r}, label_from={self.label_from!r}, "
                f"max_concurrency={self.max_concurrency}, cache_size={self.cache_size})")

    @property
    def stats(self) -> dict[str, int]:
        """The counters (a copy); see the class Attributes."""
        with self._lock:
            return dict(self._counts)

    def clear_cache(self) -> None:
        """Forget every cached pair."""
        with self._lock:
            self._cache.clear()

    # ------------------------------------------------------------------ public

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """The judge's probabilities of each pair, as the :class:`NLIScorer` protocol says
        (premises, hypotheses: n str each -> (n, 3) float32 in ``labels`` order, rows summing
        to 1; inputs checked by :func:`check_pairs`).

        Raises
        ------
        LLMError
            A request failed (after the client's retries), or ``label_from="logprobs"``
            and the server returned no log-probabilities.
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        n = len(premises)
        if n == 0:
            return empty_probs()
        keys = list(zip(premises, hypotheses))
        rows: dict[tuple[str, str], np.ndarray] = {}
        with self._lock:
            for key in keys:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    rows[key] = hit
        missing = list(dict.fromkeys(k for k in keys if k not in rows))
        with self._lock:
            self._counts["cache_hits"] += n - len(missing)
        if missing:
            rows.update(self._ask_all(missing))
        return np.stack([rows[k] for k in keys]).astype(np.float32)

    # ------------------------------------------------------------------ internals

    def _ask_all(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        if len(pairs) == 1 or self.max_concurrency == 1:
            return {pair: self._ask(pair) for pair in pairs}
        out = {}
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(pairs)),
                                thread_name_prefix="rrag-llm-judge") as pool:
            futures = {pool.submit(self._ask, pair): pair for pair in pairs}
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                for f in pending:
                    f.cancel()
                raise failed[0].exception()
            for f, pair in futures.items():
                out[pair] = f.result()
        return out

    def _ask(self, pair: tuple[str, str]) -> np.ndarray:
        premise, hypothesis = pair
        messages = [{"role": "system", "content": JUDGE_INSTRUCTION},
                    {"role": "user", "content": JUDGE_TEMPLATE.format(premise=premise, hypothesis=hypothesis)}]
        want_logprobs = self.label_from != "text"
        with self._lock:
            self._counts["requests"] += 1
        result = self.llm.chat(messages, max_tokens=self.max_tokens, temperature=0.0,
                               top_logprobs=self.top_logprobs if want_logprobs else None)
        row = None
        if want_logprobs:
            if result.logprobs is None:
                if self.label_from == "logprobs":
                    raise LLMError(
                        f"the server {self._server} returned no log-probabilities (asked for top_logprobs="
                        f"{self.top_logprobs}); LLMJudgeNLI(label_from='logprobs') needs them: pass "
                        f"label_from='text' (read the answer word) or 'auto'", url=getattr(self.llm, "url", None))
                if not self._warned_auto:
                    self._warned_auto = True
                    logger.warning("LLMJudgeNLI: %s returned no log-probabilities; reading the answer word "
                                   "instead (label_from='auto')", self._server)
            else:
                row = self._row_from_logprobs(result.logprobs)
        if row is not None:
            source = "from_logprobs"
        else:
            label = _text_label(result.text)
            source = "from_text"
            if label is None:
                source = "unparseable"
                label = 1
                logger.warning("LLMJudgeNLI: the reply %r names no label (entailment, neutral, contradiction); "
                               "read as neutral", result.text[:80])
            row = self._text_rows[label]
        row = np.array(row, dtype=np.float64)  # a copy of its own, read-only: it is cached
        row.flags.writeable = False
        with self._lock:
            self._counts[source] += 1
            if self.cache_size:
                self._cache[pair] = row
                self._cache.move_to_end(pair)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return row

    def _row_from_logprobs(self, logprobs: Any) -> np.ndarray | None:
        """The normalised row from the first lettered token's alternatives, or None when none
        of them names a label (or no generated token holds a letter)."""
        for tok in logprobs:
            if any(ch.isalpha() for ch in tok.token):
                break
        else:
            return None
        alternatives = list(tok.top)
        if all(t != tok.token for t, _ in alternatives):
            alternatives.append((tok.token, tok.logprob))
        mass = np.zeros(3, dtype=np.float64)
        found = np.zeros(3, dtype=bool)
        for text, lp in alternatives:
            k = token_label(text)
            if k is not None and math.isfinite(lp):
                mass[k] += math.exp(min(lp, 0.0))
                found[k] = True
        if not found.any():
            return None
        p_min = min(math.exp(min(lp, 0.0)) for _, lp in alternatives if math.isfinite(lp))
        mass[~found] = max(min(self.floor, p_min), np.finfo(np.float64).tiny)
        return mass / mass.sum()
