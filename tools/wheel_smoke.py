"""Smoke test of an installed rrag_kernels wheel (run from outside the source tree).

    python tools/wheel_smoke.py core   # the wheel alone: numpy + the compiled kernels
    python tools/wheel_smoke.py cpu    # with the [cpu] extra: the defense on the packaged judge

``core`` checks that the compiled module loads from site-packages (not from a source tree),
runs two kernels against their float64 references on seeded inputs, calibrates the conformal filter on
the packaged sample and runs the model-free MIRAGE defense. ``cpu`` also loads the packaged
ONNX judge (its model files and NOTICE must be in the wheel) and defends the packaged
sample with it. Exit status 0 when every check passes; each check prints one line, a
failure prints what differed and exits 1. Used by ``tools/wheel_smoke.sh`` (CI) and by
cibuildwheel's ``test-command``.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np


def _check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        sys.exit(1)


def core() -> None:
    import rrag_kernels
    from rrag_kernels import _core, ops, reference

    where = Path(_core.__file__).resolve()
    _check("compiled module from site-packages", "site-packages" in where.parts or "dist-packages" in where.parts,
           str(where))
    cfg = rrag_kernels.show_config()
    _check("version and build", bool(rrag_kernels.__version__), f"{rrag_kernels.__version__}, "
           f"SIMD {cfg.get('simd_level', cfg.get('simd', '?'))}, threads {rrag_kernels.get_num_threads()}")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 24)).astype(np.float32)
    b = rng.standard_normal((53, 24)).astype(np.float32)
    got = ops.cosine_matrix(a, b)
    err = float(np.abs(got - reference.cosine_matrix_ref(a, b)).max())
    _check("cosine_matrix vs the float64 reference", got.shape == (37, 53) and err < 1e-5, f"max abs err {err:.2e}")

    scores = rng.random(101)
    q = ops.conformal_quantile(scores, 0.1)
    want = reference.conformal_quantile_ref(scores, np.array([0.1]))
    _check("conformal_quantile = the reference's ceil((n+1)(1-a))-th smallest", float(q) == float(np.ravel(want)[0]),
           f"{float(q):.6f}")

    from rrag_kernels.pipelines.conformal import ClaimConformal, from_responses, load_sample

    data = from_responses(load_sample()["data"], score="relevance")
    cc = ClaimConformal(alpha=0.2).calibrate(data.scores, data.labels_ok, data.offsets)
    keep = cc.filter(data.scores, data.offsets)
    _check("conformal calibrate + filter on the packaged sample",
           np.isfinite(cc.q_hat) and keep.shape == data.scores.shape and bool(np.all(keep == (data.scores >= cc.q_hat))),
           f"q_hat {cc.q_hat:.4f}, {int(keep.sum())}/{keep.size} claims kept")

    from rrag_kernels.models import nli
    from rrag_kernels.pipelines.mirage import MirageDefense

    mirage = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    item = mirage["questions"][0]
    passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
    result = MirageDefense(nli=nli.load("lexical")).defend(item["question"], passages)
    _check("MIRAGE defense (lexical judge)", len(result.claims) > 0 and isinstance(result.prompt, str),
           f"{len(result.claims)} claims, {len(result.kept_claims)} kept, gate "
           f"{'PASS' if result.gate_passed else 'BLOCK'}")


def cpu() -> None:
    from rrag_kernels.models import nli
    from rrag_kernels.pipelines.mirage import MirageDefense

    model_dir = nli.default_model_dir()
    _check("packaged judge in the wheel", model_dir is not None and (model_dir / "model.onnx").is_file()
           and (model_dir / "NOTICE.md").is_file(), str(model_dir))
    judge = nli.load()
    probs = np.asarray(judge.predict_proba(["The bridge opened in 1914."], ["The bridge opened in 1904."]))
    _check("judge scores a pair", probs.shape == (1, 3) and abs(float(probs.sum()) - 1.0) < 1e-4,
           f"{type(judge).__name__} p = {[round(float(x), 3) for x in probs[0]]}")
    mirage = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    defense = MirageDefense(nli=judge)
    for item in mirage["questions"]:
        passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
        result = defense.defend(item["question"], passages)
        _check(f"defense on '{item['question'][:40]}'", len(result.claims) > 0,
               f"{len(result.kept_claims)}/{len(result.claims)} kept, gate "
               f"{'PASS' if result.gate_passed else 'BLOCK'}")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("core", "cpu"):
        print("usage: wheel_smoke.py core|cpu", file=sys.stderr)
        return 2
    if Path.cwd().joinpath("python", "rrag_kernels").is_dir():
        print("wheel_smoke.py: run it outside the source tree (it must test the installed wheel)", file=sys.stderr)
        return 2
    core()
    if argv[0] == "cpu":
        cpu()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
