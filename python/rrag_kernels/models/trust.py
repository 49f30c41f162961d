"""Source trust by registered domain: URL -> registered domain -> category -> trust.

The registered domain
---------------------
A URL's trust is decided by its *registered domain*: the part of the host that one
registrant controls, one label below a public suffix of the Public Suffix List (PSL)
(``cdc.gov.fake-site.com`` -> ``fake-site.com``; ``en.wikipedia.org`` -> ``wikipedia.org``;
``ox.ac.uk`` -> ``ox.ac.uk``; ``alice.github.io`` -> ``alice.github.io``, because
``github.io`` is a suffix under which every user registers their own name). Words in the
host to the left of the registered domain are chosen by its registrant and say nothing
about the source, so they never raise trust. The PSL is the snapshot bundled with the
``publicsuffixlist`` package (pure Python, no dependencies); nothing is fetched at run time.

How a URL is read (:func:`url_host`), all in the standard library:

- With or without a scheme (``"en.wikipedia.org/wiki/X"`` works); a backslash counts as
  ``/``, as browsers read http(s) URLs (``"http://evil.com\\@who.int"`` is ``evil.com``);
  userinfo and port are dropped (``"http://user@who.int:8080/"`` is ``who.int``).
- The host is lower-cased and IDNA-encoded (the standard library's IDNA 2003 codec:
  ``"bücher.de"`` -> ``"xn--bcher-kva.de"``, full-width dots are dots; note that it maps
  ``ß`` to ``ss``); a trailing dot is dropped.
- Anything that is not a plain DNS name is not a host: an IP address, a label outside
  ``[a-z0-9_-]`` (percent escapes, spaces, U+FFFD), an empty or over-long label.

A host has a registered domain only if its suffix is on the PSL (``localhost``,
``intranet.local``, a bare public suffix such as ``co.uk`` or ``github.io``, and a single
word such as ``"Wikipedia"`` have none). Whatever has no registered domain -- no URL, a
non-URL string, an IP address, a garbled host -- is the domain ``"unknown"`` and gets the
``unknown`` trust: nothing identifies who published it. Nothing here raises on a bad URL.

Categories (:data:`DEFAULT_TRUST`)
----------------------------------
A registered domain's category is, in this order:

1. its entry in :data:`DOMAIN_CATEGORIES` (a short list of well-known registered domains);
2. its ICANN public suffix, where the suffix's registry restricts who may register:
   ``gov``, ``mil`` and a country's ``gov.*`` / ``gouv.*`` / ``gob.*`` / ``govt.*`` /
   ``gv.*`` / ``mil.*`` (and ``go.jp``, ``go.kr``) -> ``government``; ``int`` (treaty
   organisations) -> ``intergovernmental``; ``edu`` and a country's ``edu.*`` / ``ac.*``
   -> ``academic``; the ``blog`` TLD -> ``blog``;
3. a registered domain under a suffix of the PSL's *private* section (``*.github.io``,
   ``*.blogspot.com``, ``*.netlify.app``: a customer's site on a shared host) -> ``blog``
   (self-published);
4. otherwise ``unknown``.

The values follow the MIRAGE paper's table where it has the category (wiki 0.90, gov/edu
0.80, news 0.70, forum 0.20, unknown 0.40); ``intergovernmental`` gets the government value
and ``blog`` (self-published) 0.30, between forum and unknown. The paper's ``.org`` (0.65)
and ``.com`` (0.50) categories are not kept: anyone can register under those suffixes, so
they say nothing about a source (such domains are ``unknown`` unless listed).

Overrides (:func:`trust_table`) merge with the defaults: a category key sets that category's
value; a registered-domain key sets that domain's trust and wins over its category.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..ops import check_real
from .text import clean_text

#: Trust per category (see the module docstring for where each value comes from).
DEFAULT_TRUST: dict[str, float] = {
    "encyclopedia": 0.90,
    "government": 0.80,
    "intergovernmental": 0.80,
    "academic": 0.80,
    "news": 0.70,
    "unknown": 0.40,
    "blog": 0.30,
    "forum": 0.20,
}

#: The category of a few well-known registered domains whose suffix says nothing (``.org``,
#: ``.com``, ...). Kept short on purpose: each entry is a registered domain whose registrant
#: publishes one kind of source; a domain that hosts several kinds under one registration
#: (``go.com``) is not listed.
DOMAIN_CATEGORIES: dict[str, str] = {
    **dict.fromkeys(("wikipedia.org", "britannica.com"), "encyclopedia"),
    **dict.fromkeys(("un.org", "unesco.org", "europa.eu", "oecd.org", "worldbank.org", "imf.org"), "intergovernmental"),
    # Peer-reviewed publishers count as academic.
    **dict.fromkeys(("nature.com", "science.org", "thelancet.com", "nejm.org", "bmj.com"), "academic"),
    **dict.fromkeys(
        (
            "nytimes.com reuters.com apnews.com bbc.com bbc.co.uk theguardian.com washingtonpost.com "
            "wsj.com npr.org cnn.com economist.com ft.com bloomberg.com aljazeera.com latimes.com "
            "usatoday.com nbcnews.com cbsnews.com time.com newsweek.com politico.com theatlantic.com "
            "lemonde.fr spiegel.de dw.com france24.com"
        ).split(),
        "news",
    ),
    **dict.fromkeys(
        "reddit.com quora.com stackexchange.com stackoverflow.com 4chan.org facebook.com twitter.com x.com".split(),
        "forum",
    ),
    **dict.fromkeys("medium.com substack.com wordpress.com blogger.com tumblr.com".split(), "blog"),
}

# ICANN suffixes by their leftmost label (a country's government or academic zone), and the
# whole suffixes that decide a category on their own.
_GOVERNMENT_LABELS = frozenset(("gov", "gouv", "gob", "govt", "gv", "mil"))
_ACADEMIC_LABELS = frozenset(("edu", "ac"))
_SUFFIX_CATEGORIES = {
    "gov": "government",
    "mil": "government",
    "go.jp": "government",  # "go" alone is not a government label everywhere (go.it: Gorizia)
    "go.kr": "government",
    "int": "intergovernmental",
    "edu": "academic",
    "blog": "blog",
}
#: What the old category names of 0.1.0 became (named in the error for an old key).
_RENAMED = {"wiki": "encyclopedia", "gov_edu": "government and academic", "org": "unknown", "com": "unknown"}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


@functools.cache
def _suffix_lists():
    """The bundled PSL, whole and ICANN-only (parsed once, ~0.1 s each; thread-safe after)."""
    try:
        from publicsuffixlist import PublicSuffixList
    except ImportError as exc:  # a core dependency; missing only after a --no-deps install
        raise ImportError("url_domain: needs the publicsuffixlist package (pip install publicsuffixlist)") from exc

    return PublicSuffixList(accept_unknown=False), PublicSuffixList(accept_unknown=False, only_icann=True)


def url_host(url: Any) -> str | None:
    """The host of a URL as a lower-case ASCII DNS name, or None when it has none.

    Parameters
    ----------
    url : str or None
        With or without a scheme. Anything else (None, a number) has no host.

    Returns
    -------
    str or None
        IDNA-encoded, without userinfo, port or trailing dot; None for an IP address, an
        empty host or one that is not a plain DNS name (see the module docstring).
    """
    if not isinstance(url, str):
        return None
    candidate = clean_text(url).strip().replace("\\", "/")
    if "//" not in candidate:
        candidate = "//" + candidate
    try:
        host = urlsplit(candidate).hostname or ""
        host = host.rstrip(".").encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError):  # a bad IPv6 literal, an unencodable label
        return None
    if not host:
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if not all(_LABEL.fullmatch(label) for label in host.split(".")):
        return None
    return host


def url_domain(url: Any) -> str:
    """The registered domain of a URL's host (PSL), or ``"unknown"`` when it has none.

    Parameters
    ----------
    url : str or None
        A URL, a bare host or a registered domain (idempotent: ``url_domain(url_domain(u))
        == url_domain(u)``).

    Returns
    -------
    str
        ``"https://cdc.gov.fake-site.com/x"`` -> ``"fake-site.com"``, ``"http://user@who.int:8080/"``
        -> ``"who.int"``, ``"Wikipedia"`` -> ``"unknown"``.
    """
    host = url_host(url)
    if host is None:
        return "unknown"
    return _suffix_lists()[0].privatesuffix(host) or "unknown"


def domain_category(domain: Any) -> str:
    """The trust category of a registered domain (or of any URL or host: it is reduced to
    its registered domain first).

    Parameters
    ----------
    domain : str
        ``"who.int"``, ``"https://en.wikipedia.org/wiki/X"``, ``"unknown"``.

    Returns
    -------
    str
        A key of :data:`DEFAULT_TRUST`, by the rule in the module docstring.
    """
    registered = url_domain(domain)
    if registered == "unknown":
        return "unknown"
    if registered in DOMAIN_CATEGORIES:
        return DOMAIN_CATEGORIES[registered]
    whole, icann = _suffix_lists()
    suffix = icann.publicsuffix(registered) or ""
    labels = suffix.split(".")
    if suffix in _SUFFIX_CATEGORIES:
        return _SUFFIX_CATEGORIES[suffix]
    if len(labels) >= 2 and labels[0] in _GOVERNMENT_LABELS:
        return "government"
    if len(labels) >= 2 and labels[0] in _ACADEMIC_LABELS:
        return "academic"
    if whole.publicsuffix(registered) != suffix:  # under a suffix of the private section
        return "blog"
    return "unknown"


def trust_table(overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The default trust table merged with ``overrides``.

    Parameters
    ----------
    overrides : mapping of str to float, optional
        Keys are categories (``"forum"``: that category's value) or registered domains
        (``"example.org"``: that domain's trust, which wins over its category; written in
        any case or in Unicode, stored as :func:`url_domain` gives it). Values in [0, 1].

    Returns
    -------
    dict
        Every category of :data:`DEFAULT_TRUST`, then the domain entries.

    Raises
    ------
    TypeError
        ``overrides`` is not a mapping, a key is not a str or a value not a number.
    ValueError
        A key is neither a category nor a registered domain (the message names it and lists
        the categories; a host below a registered domain names that domain), or a value is
        outside [0, 1].
    """
    table = dict(DEFAULT_TRUST)
    if overrides is None:
        return table
    if not isinstance(overrides, Mapping):
        raise TypeError(f"trust: expected a mapping of category or domain to float, got {type(overrides).__name__}")
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise TypeError(f"trust: keys must be str, got {type(key).__name__}")
        v = check_real(value, f"trust[{key!r}]")
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"trust[{key!r}]: must be in [0, 1], got {v}")
        table[_trust_key(key)] = v
    return table


def _trust_key(key: str) -> str:
    """A category, or the registered domain ``key`` names; ValueError for anything else."""
    if key in DEFAULT_TRUST:
        return key
    domain = url_domain(key)
    if domain != "unknown" and domain == url_host(key):
        return domain
    categories = ", ".join(DEFAULT_TRUST)
    if domain != "unknown":
        why = f"is a host below the registered domain {domain!r}; domain entries are by registered domain"
    elif key in _RENAMED:
        why = f"is a category of 0.1.0, now {_RENAMED[key]}"
    else:
        why = "is neither a category nor a registered domain"
    raise ValueError(f"trust: key {key!r} {why} (categories: {categories}; domains as 'who.int')")


def trust_score(domain: Any, table: Mapping[str, Any] | None = None) -> float:
    """Trust of a registered domain (or of any URL or host, reduced to its registered domain).

    Parameters
    ----------
    domain : str
    table : mapping, optional
        Overrides merged with :data:`DEFAULT_TRUST` by :func:`trust_table` (a partial table
        is fine); a registered-domain entry wins over the domain's category.

    Returns
    -------
    float
    """
    merged = trust_table(table)
    registered = url_domain(domain)
    if registered in merged:
        return merged[registered]
    return merged[domain_category(registered)]
