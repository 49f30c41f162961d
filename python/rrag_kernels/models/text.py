"""Text helpers shared by the pipelines: sentence claims, URL domains, source trust."""

from __future__ import annotations

import re
from typing import Mapping
from urllib.parse import urlsplit

# Words after which a period does not end a sentence (lower-cased, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft no nos vol vols fig figs eq eqs ed eds rev gen gov sen rep "
    "col lt sgt capt cmdr adm inc ltd co corp dept univ assn bros vs etc approx ca cf al ie eg "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace,
# then something that can start a sentence.
_BOUNDARY = re.compile(r"([.!?])([\"'\u2019\u201d)\]]*)\s+(?=[\"'\u2018\u201c(\[]?[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


def split_sentences(text: str) -> list[str]:
    """Split a passage into sentences.

    A boundary is ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by space and
    an upper-case letter or digit, except after a known abbreviation ("Dr.", "St.", "e.g."),
    a single-letter initial ("J. Smith") or a dotted acronym ("U.S. Army"). Decimals
    ("3.5") never split because no space follows their period. Whitespace is normalised.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
        Non-empty sentences in order.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    text = " ".join(text.split())
    if not text:
        return []
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group(1) == ".":
            before = _WORD_BEFORE.search(text[start : m.start(1)])
            word = before.group(1) if before else ""
            bare = word.replace(".", "").lower()
            if bare in _ABBREVIATIONS or (len(word) == 1 and word.isupper()) or "." in word:
                continue
        end = m.end(2)
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def url_domain(url: str | None) -> str:
    """Host of a URL, lower-cased, without ``www.``; ``"unknown"`` when there is none.

    Parameters
    ----------
    url : str or None
        With or without a scheme ("en.wikipedia.org/wiki/X" works too).
    """
    if not url or not isinstance(url, str):
        return "unknown"
    candidate = url.strip()
    if "//" not in candidate:
        candidate = "//" + candidate
    try:
        host = urlsplit(candidate).hostname or ""
    except ValueError:
        return "unknown"
    host = host.lower().rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    return host or "unknown"


NEWS_DOMAINS = frozenset(
    "nytimes.com reuters.com apnews.com bbc.com bbc.co.uk theguardian.com washingtonpost.com "
    "wsj.com npr.org cnn.com economist.com ft.com bloomberg.com aljazeera.com latimes.com "
    "usatoday.com nbcnews.com cbsnews.com abcnews.go.com time.com newsweek.com politico.com "
    "theatlantic.com lemonde.fr spiegel.de dw.com france24.com".split()
)
FORUM_MARKERS = ("reddit.", "quora.", "forum", "stackexchange.", "4chan.", "boards.", "community.")

#: Default trust per category (the MIRAGE paper's table).
DEFAULT_TRUST: dict[str, float] = {
    "wiki": 0.90,
    "gov_edu": 0.80,
    "news": 0.70,
    "forum": 0.20,
    "org": 0.65,
    "com": 0.50,
    "unknown": 0.40,
}


def domain_category(domain: str) -> str:
    """The trust category of a domain, by fixed priority: wiki > gov/edu > news > forum >
    .org > .com > unknown (anything else, including no URL)."""
    d = domain.lower()
    if d == "unknown" or not d:
        return "unknown"
    labels = d.split(".")
    if "wikipedia" in labels or "wiki" in labels or d.endswith("wikipedia.org"):
        return "wiki"
    tld = labels[-1]
    if tld in ("gov", "edu") or ".gov." in f".{d}." or ".edu." in f".{d}.":
        return "gov_edu"
    if any(d == n or d.endswith("." + n) for n in NEWS_DOMAINS):
        return "news"
    if any(marker in d for marker in FORUM_MARKERS):
        return "forum"
    if tld == "org":
        return "org"
    if tld == "com":
        return "com"
    return "unknown"


def trust_score(domain: str, table: Mapping[str, float] | None = None) -> float:
    """Trust of a domain from its category (:func:`domain_category`) and ``table``
    (default :data:`DEFAULT_TRUST`); an exact domain key in ``table`` wins over its category."""
    table = DEFAULT_TRUST if table is None else table
    if domain in table:
        return float(table[domain])
    return float(table[domain_category(domain)])
