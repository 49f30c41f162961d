"""Every code example of README.md and docs/ runs (issue 24: none can rot again).

* Each ```python block runs, in order, one namespace per file, in a temporary working
  directory; a block marked ``<!-- docs-test: skip (reason) -->`` on the line before its
  fence is left out (it needs what a test does not have: a server at a URL, a GPU, a hub
  model, minutes of benchmark). Output shown to the reader sits in ```text blocks.
* Each ``rrag <command> ...`` line of a ```bash / ```sh block names a command of the CLI, and
  every ``--option`` it gives is an option of that command (nothing runs: the lines name
  files and servers of the reader's).
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] if (ROOT / "docs").is_dir() \
    else [ROOT / "README.md"]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.MULTILINE | re.DOTALL)
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->\s*$")


def _blocks(page: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, skip reason or None) of each fenced block of a page."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        body = "\n".join(ln[len(m["indent"]):] for ln in m["body"].splitlines())
        out.append((line, m["lang"].lower(), body, skip["why"] if skip else None))
    return out


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_have_examples():
    """Guard against a vacuous pass: the README's examples are found and most of them run."""
    blocks = _blocks(ROOT / "README.md")
    python = [b for b in blocks if b[1] == "python"]
    assert python and sum(b[3] is None for b in python) >= len(python) / 2
    assert any(b[1] in ("bash", "sh", "console") and "rrag " in b[2] for b in blocks)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_python_examples_run(page, tmp_path, monkeypatch):
    blocks = [b for b in _blocks(page) if b[1] in ("python", "py")]
    if not any(b[3] is None for b in blocks):
        pytest.skip(f"{_name(page)} has no python example that runs in a test")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    namespace: dict = {"__name__": f"docs_example_{page.stem}"}
    for line, _, code, skip in blocks:
        if skip is not None:
            continue
        try:
            exec(compile(code, f"{_name(page)}:{line}", "exec"), namespace)  # noqa: S102 - the docs' own examples
        except Exception as exc:
            raise AssertionError(f"{_name(page)}, the python block at line {line} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc


def _cli_options() -> dict[str, set[str]]:
    """Command (``conformal filter`` for nested ones) -> its option strings."""
    from rrag_kernels.cli.main import build_parser

    out: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    key = f"{prefix} {name}".strip()
                    out[key] = {s for a in sub._actions for s in a.option_strings}
                    walk(sub, key)

    walk(build_parser(), "")
    return out


RRAG_START = re.compile(r"^(?:\$\s+)?(?:\w+=\S*\s+)*(?:rrag|rrag-kernels|python -m rrag_kernels)(?:\s|$)")


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    return list(lexer)


def _rrag_lines(code: str) -> list[list[str]]:
    """The ``rrag ...`` commands of a shell block: each line that starts one (continuation
    lines and quotes spanning lines joined), cut at ``&&``, ``|``, ``;``; comments dropped."""
    lines = re.sub(r"\\\n\s*", " ", code).splitlines()
    out = []
    k = 0
    while k < len(lines):
        text, k = lines[k].strip(), k + 1
        if not RRAG_START.match(text):
            continue
        while True:
            try:
                tokens = _tokens(re.sub(r"^\$\s+", "", text))
                break
            except ValueError:  # a quote that ends on a later line
                if k >= len(lines):
                    raise
                text, k = text + "\n" + lines[k], k + 1
        words: list[str] = []
        for token in [*tokens, ";"]:
            if set(token) <= set("&|;()<>"):  # a command ends
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value prefixes
                if words[:1] in (["rrag"], ["rrag-kernels"]):
                    out.append(words[1:])
                elif words[:3] == ["python", "-m", "rrag_kernels"]:
                    out.append(words[3:])
                words = []
            else:
                words.append(token)
    return out


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_cli_examples_name_real_commands_and_options(page):
    options = _cli_options()
    lines = [(line, words) for line, lang, code, _ in _blocks(page) if lang in ("bash", "sh", "shell", "console")
             for words in _rrag_lines(code)]
    if not lines:
        pytest.skip(f"{_name(page)} shows no rrag command")
    for line, words in lines:
        if not words or words[0] in ("-h", "--help", "--version"):
            continue
        command = words[0]
        if len(words) > 1 and f"{command} {words[1]}" in options:
            command = f"{command} {words[1]}"
        assert command in options, f"{_name(page)}:{line}: 'rrag {command}' is not a command"
        for word in words:
            if word.startswith("--"):
                flag = word.split("=", 1)[0]
                assert flag in options[command], f"{_name(page)}:{line}: 'rrag {command}' has no option {flag}"


def test_the_skip_marker_is_read(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("x\n<!-- docs-test: skip (needs a server) -->\n```python\nraise SystemExit\n```\n\n"
                    "```bash\nrrag defend in.jsonl out.jsonl --nli lexical \\\n  --quiet  # comment\n```\n")
    (b1, b2) = _blocks(page)
    assert b1[1:] == ("python", "raise SystemExit", "needs a server")
    assert _rrag_lines(b2[2]) == [["defend", "in.jsonl", "out.jsonl", "--nli", "lexical", "--quiet"]]
