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
import os
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


# ---------------------------------------------------------------------------- shell lines run

SHARED = ROOT.parent / "shared"

# The files the pages' command lines read, as the reader would have them: questions with
# passages (defend, d2f's corpus), labelled claims in the released format (conformal), and
# responses with scored claims (conformal filter).
_RESPONSES = [
    {"id": 1, "prompt": "Tell me about Paris.", "claims": [
        {"text": "Paris is the capital of France.", "score": 0.91},
        {"text": "Paris has 40 million inhabitants.", "score": 0.12}]},
    {"id": 2, "prompt": "When was the Eiffel Tower completed?", "claims": [
        {"text": "The Eiffel Tower was completed in 1889.", "score": 0.88}]},
]


def _write_reader_files(work: Path) -> None:
    import json
    from importlib import resources

    data = resources.files("rrag_kernels").joinpath("data")
    questions = json.loads(data.joinpath("mirage_sample.json").read_text(encoding="utf-8"))["questions"]
    unlabelled = "".join(json.dumps({"id": q.get("id"), "question": q["question"],
                                     "passages": [{k: p[k] for k in ("text", "url", "title", "retrieval_score")
                                                   if k in p} for p in q["passages"]]}) + "\n"
                         for q in questions)
    for name in ("in.jsonl", "questions.jsonl", "corpus.jsonl"):
        (work / name).write_text(unlabelled, encoding="utf-8")
    claims = data.joinpath("conformal_sample.json").read_text(encoding="utf-8")
    for name in ("claims.json", "claims.jsonl"):
        (work / name).write_text(claims, encoding="utf-8")
    (work / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _RESPONSES), encoding="utf-8")


def _option(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words[:-1] else None


def _why_not_run(words: list[str]) -> str | None:
    """Why a test cannot run a documented line as written (it is still checked above), or None."""
    command = words[0]
    if command == "serve":
        return "starts a server that runs until stopped (tests/test_server.py runs its options)"
    if "--url" in words:
        return "needs the reader's OpenAI-compatible server"
    if command in ("d2f", "reliablerag") or _option(words, "--llm") in ("model", "embedded"):
        return "answers with the embedded SmolLM2: minutes on 2 cores (tests/test_llm.py runs it)"
    if command == "reliablerag-eval":
        return "its offline grid takes minutes on 2 cores (tests/test_cli.py runs the command)"
    # d2f-eval and reliablerag-eval read ../shared/data/multihop_dev.jsonl when given no file.
    if (any("../shared/" in w for w in words) or command in ("d2f-eval", "reliablerag-eval")) \
            and not SHARED.is_dir():
        return "needs ../shared/data"
    return None


def _shell_lines(page: Path) -> list[tuple[int, list[str]]]:
    return [(line, words) for line, lang, code, skip in _blocks(page)
            if lang in ("bash", "sh", "shell", "console") and skip is None for words in _rrag_lines(code)
            if words and words[0] not in ("-h", "--help", "--version")]


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _shell_lines(p)], ids=_name)
def test_cli_examples_run(page, tmp_path):
    """Each documented ``rrag`` line runs as written and exits 0, in a folder holding the files
    it names (``../shared`` is the clone's sibling, as from the repository root); the
    evaluations run on their first 2 questions (``--limit 2``: the line's setting, not its
    figures). A line that cannot run here is skipped for a reason :func:`_why_not_run` gives."""
    import subprocess
    import sys

    lines = _shell_lines(page)
    runnable = [(line, words) for line, words in lines if _why_not_run(words) is None]
    if not runnable:
        pytest.skip(f"{_name(page)}: no rrag line that runs here"
                    + "".join(f"; line {line}: {_why_not_run(w)}" for line, w in lines))
    work = tmp_path / "work"
    work.mkdir()
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    _write_reader_files(work)
    env = {**os.environ, "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
    if env.get("PYTHONPATH"):  # the lines run in another folder: a relative entry would miss
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    for line, words in runnable:
        if words[0] == "mirage-eval":
            words = [*words, "--limit", "2", "--no-progress"]
        run = subprocess.run([sys.executable, "-m", "rrag_kernels", *words], cwd=work, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (f"{_name(page)}:{line}: 'rrag {' '.join(words)}' exited {run.returncode}:\n"
                                     f"{run.stderr[-2000:]}")


def test_most_documented_lines_run():
    """Guard against a vacuous pass: the skip rules leave most documented lines to run."""
    lines = [words for page in PAGES for _, words in _shell_lines(page)]
    runnable = [w for w in lines if _why_not_run(w) in (None, "needs ../shared/data")]
    assert len(lines) >= 20 and len(runnable) >= 0.6 * len(lines), (len(runnable), len(lines))
