"""Source trust by registered domain (Public Suffix List): hosts, registered domains,
categories, the trust table and its overrides, and the defense using them."""

from __future__ import annotations

import pytest

from rrag_kernels.models import (
    DEFAULT_TRUST,
    DOMAIN_CATEGORIES,
    domain_category,
    trust_score,
    trust_table,
    url_domain,
    url_host,
)
from rrag_kernels.pipelines.mirage import MirageDefense, MirageParams

UNKNOWN = DEFAULT_TRUST["unknown"]


class NeutralNLI:
    labels = ("entailment", "neutral", "contradiction")

    def predict_proba(self, premises, hypotheses):
        return [[0.0, 1.0, 0.0] for _ in premises]


@pytest.mark.parametrize(
    "url, registered",
    [
        # Spoofing: words left of the registered domain are the registrant's choice.
        ("https://cdc.gov.fake-site.com/x", "fake-site.com"),
        ("https://wikipedia.org.evil.net/wiki/X", "evil.net"),
        ("http://who.int.example.com/", "example.com"),
        ("http://who.int@evil.com/", "evil.com"),  # userinfo that looks like a host
        ("http://evil.com\\@who.int/", "evil.com"),  # a backslash is a '/', as browsers read it
        # Ordinary hosts, case, ports, userinfo, trailing dot, no scheme.
        ("https://en.wikipedia.org/wiki/X", "wikipedia.org"),
        ("HTTPS://WWW.WHO.INT/news", "who.int"),
        ("http://user@who.int:8080/", "who.int"),
        ("http://user:pw@www.ox.ac.uk:443/a?b#c", "ox.ac.uk"),
        ("who.int.", "who.int"),
        ("en.wikipedia.org/wiki/X", "wikipedia.org"),
        ("https://a.b.service.gov.uk/x", "b.service.gov.uk"),
        # IDN: IDNA-encoded; full-width dots are dots; a look-alike letter is another domain.
        ("https://bücher.de/", "xn--bcher-kva.de"),
        ("https://xn--bcher-kva.de/", "xn--bcher-kva.de"),
        ("https://who\u3002int/", "who.int"),
        ("https://w\u0456kipedia.org/", "xn--wkipedia-thh.org"),
        # Private suffixes: every user is a separate registrant.
        ("https://alice.github.io/post", "alice.github.io"),
        ("https://bob.blogspot.com/2020/01/x.html", "bob.blogspot.com"),
        # Nothing identifies a registrant.
        ("Wikipedia", "unknown"),
        ("http://localhost:8000/x", "unknown"),
        ("http://intranet.local/", "unknown"),
        ("https://github.io/", "unknown"),  # a public suffix itself
        ("https://co.uk/", "unknown"),
        ("http://192.168.1.1/admin", "unknown"),
        ("http://[2001:db8::1]:80/", "unknown"),
        ("http://[::1/", "unknown"),  # a broken IPv6 literal
        ("http://%77ho.int/", "unknown"),  # percent escapes are not a DNS name
        ("not a url at all", "unknown"),
        ("https://ex\ufffdample.org/", "unknown"),
        ("https://" + "a" * 64 + ".com/", "unknown"),  # label over 63 characters
        ("https://who..int/", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
        (42, "unknown"),
    ],
)
def test_registered_domain(url, registered):
    assert url_domain(url) == registered
    assert url_domain(registered) == registered  # idempotent


def test_url_host_keeps_the_whole_host():
    assert url_host("http://user@Docs.Example.CO.UK:8080/x") == "docs.example.co.uk"
    assert url_host("http://127.0.0.1/") is None and url_host("  ") is None


@pytest.mark.parametrize(
    "url, category",
    [
        ("https://en.wikipedia.org/wiki/X", "encyclopedia"),
        ("https://www.britannica.com/topic/X", "encyclopedia"),
        ("https://www.who.int/news", "intergovernmental"),  # the .int suffix
        ("https://whc.unesco.org/en/list/1", "intergovernmental"),  # a listed domain
        ("https://www.cdc.gov/x", "government"),
        ("https://www.gov.uk/x", "government"),  # www.gov.uk is registered under gov.uk
        ("https://www.tajmahal.gov.in/", "government"),
        ("https://www.elysee.gouv.fr/", "government"),
        ("https://www.kantei.go.jp/", "government"),
        ("https://a.b.service.gov.uk/", "government"),  # a private suffix below gov.uk stays government
        ("https://www.army.mil/", "government"),
        ("https://www.ox.ac.uk/", "academic"),
        ("https://plato.stanford.edu/entries/x", "academic"),
        ("https://www.sydney.edu.au/", "academic"),
        ("https://www.nature.com/articles/x", "academic"),
        ("https://www.reuters.com/world", "news"),
        ("https://www.bbc.co.uk/news", "news"),
        ("https://www.reddit.com/r/x", "forum"),
        ("https://coldwarnotes.wordpress.com/x", "blog"),
        ("https://wanderingfootnotes.blog/x", "blog"),
        ("https://alice.github.io/x", "blog"),  # a customer site on a shared host
        ("https://bob.blogspot.com/x", "blog"),
        ("https://cdc.gov.fake-site.com/x", "unknown"),
        ("https://www.comune.go.it/", "unknown"),  # go.it is Gorizia, not a government zone
        ("https://biographyfacts.org/a", "unknown"),  # .org/.com say nothing
        ("https://www.history.com/x", "unknown"),
        ("Wikipedia", "unknown"),
        ("unknown", "unknown"),
    ],
)
def test_category(url, category):
    assert domain_category(url) == category
    assert domain_category(url_domain(url)) == category
    assert trust_score(url_domain(url)) == DEFAULT_TRUST[category]


def test_the_issue_cases():
    assert trust_score(url_domain("https://cdc.gov.fake-site.com/x")) == UNKNOWN
    assert trust_score("Wikipedia") == UNKNOWN != DEFAULT_TRUST["encyclopedia"]
    assert trust_score(url_domain("https://www.who.int/")) == DEFAULT_TRUST["intergovernmental"] == 0.8
    assert trust_score(url_domain("https://www.ox.ac.uk/")) == DEFAULT_TRUST["academic"] == 0.8


def test_default_table():
    assert DEFAULT_TRUST == {
        "encyclopedia": 0.90, "government": 0.80, "intergovernmental": 0.80, "academic": 0.80,
        "news": 0.70, "unknown": 0.40, "blog": 0.30, "forum": 0.20,
    }
    assert set(DOMAIN_CATEGORIES.values()) <= set(DEFAULT_TRUST)
    # every listed key is a registered domain as url_domain writes it
    assert all(url_domain(d) == d for d in DOMAIN_CATEGORIES)


class TestOverrides:
    def test_partial_override_merges(self):
        table = trust_table({"forum": 0.05})
        assert table["forum"] == 0.05 and table["encyclopedia"] == 0.90 and set(DEFAULT_TRUST) <= set(table)
        assert trust_score("reddit.com", {"forum": 0.05}) == 0.05
        assert trust_score("wikipedia.org", {"forum": 0.05}) == 0.90  # was KeyError: 'wiki'

    def test_domain_entry_wins_over_category(self):
        table = {"Example.ORG": 0.95, "bücher.de": 0.1, "unknown": 0.3}
        assert trust_score("https://docs.example.org/x", table) == 0.95
        assert trust_score("https://xn--bcher-kva.de/", table) == 0.1
        assert trust_score("https://other.org/", table) == 0.3
        assert trust_table(table)["example.org"] == 0.95

    @pytest.mark.parametrize(
        "key, says",
        [
            ("wiki", "category of 0.1.0, now encyclopedia"),
            ("gov_edu", "category of 0.1.0"),
            ("forums", "neither a category nor a registered domain"),
            ("localhost", "neither a category nor a registered domain"),
            ("en.wikipedia.org", "below the registered domain 'wikipedia.org'"),
        ],
    )
    def test_unknown_keys_name_the_key_and_the_categories(self, key, says):
        with pytest.raises(ValueError, match=r"^trust: key ") as info:
            trust_table({key: 0.5})
        message = str(info.value)
        assert repr(key) in message and says in message
        assert all(category in message for category in DEFAULT_TRUST)

    def test_bad_values_and_types(self):
        with pytest.raises(ValueError, match=r"^trust\['forum'\]: must be in \[0, 1\]"):
            trust_table({"forum": 1.5})
        with pytest.raises(ValueError, match=r"^trust\['forum'\]"):
            trust_table({"forum": float("nan")})
        with pytest.raises(TypeError, match=r"^trust\['forum'\]: expected a float"):
            trust_table({"forum": "high"})
        with pytest.raises(TypeError, match="^trust: keys must be str"):
            trust_table({3: 0.5})
        with pytest.raises(TypeError, match="^trust: expected a mapping"):
            trust_table([("forum", 0.5)])


class TestDefense:
    def test_params_validate_overrides(self):
        assert MirageParams().trust == {}
        MirageParams(trust={"forum": 0.1}).validate()
        with pytest.raises(ValueError, match="^trust: key 'wiki'"):
            MirageDefense(nli=NeutralNLI(), trust={"wiki": 0.5})

    def test_claims_carry_registered_domain_and_merged_trust(self):
        passages = [
            {"text": "A claim here.", "url": "https://cdc.gov.fake-site.com/x"},
            {"text": "B claim here.", "url": "https://www.who.int/a"},
            {"text": "C claim here.", "url": "https://www.reddit.com/r/x"},
            {"text": "D claim here.", "url": "Wikipedia"},
        ]
        result = MirageDefense(nli=NeutralNLI(), trust={"forum": 0.05}).defend("q", passages)
        got = [(c.domain, c.trust) for c in result.claims]
        assert got == [("fake-site.com", UNKNOWN), ("who.int", 0.8), ("reddit.com", 0.05), ("unknown", UNKNOWN)]

    def test_subdomains_of_one_registrant_are_one_domain(self):
        # Two hosts of one registrant count once for the gate's distinct domains.
        passages = [{"text": "A claim here.", "url": "https://a.evil.net/"},
                    {"text": "B claim here.", "url": "https://b.evil.net/"}]
        result = MirageDefense(nli=NeutralNLI(), d_min=2, min_support_share=0.0).defend("q", passages)
        assert result.stats["n_domains"] == 1 and not result.gate_passed
