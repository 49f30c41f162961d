"""The pipelines over a Ray Dataset (``pip install "rrag_kernels[ray]"``: ``ray[data]==2.60.0``).

    import ray
    from rrag_kernels.distributed.ray import collect_by_id, defend_dataset

    ray.init()                                   # a local Ray; see "Clusters" below
    ds = ray.data.from_items([{"id": 0, "question": q, "passages": ps}, ...])
    out = defend_dataset(ds, nli="lexical", num_actors=2, batch_size=64)
    rows = collect_by_id(out)                    # one row per input row, ordered by id

Every function here returns a lazy :class:`ray.data.Dataset` built with one
``map_batches`` call: a callable class on ``compute=ray.data.ActorPoolStrategy(size=
num_actors)`` (never the deprecated ``concurrency=``), ``batch_format="pyarrow"``. Each actor
builds its heavy state (the NLI judge, the embedder, the LLM client, the retriever) once, in
its ``__init__``, from what you pass: a name or a picklable config, or a *factory*, a
zero-argument callable (a function, a ``functools.partial``, a class) that Ray pickles to the
workers and each actor calls once. A factory should build the model, never capture a built
one (a model, a lock, a socket or an open server does not pickle, and one copy would be
shipped to every actor).

Rows in, rows out
-----------------
* The input needs an id column (``id_column``, default ``"id"``: any Arrow type, unique per
  row) and the columns the pipeline reads (listed per function); every output row carries
  its input row's id, so :func:`collect_by_id` (or ``ds.sort(id_column)``) restores the
  order Ray does not keep.
* Count in = count out. An item that fails (bad passages, a scorer or LLM that raises, a
  result that cannot be stored) becomes a row whose ``error`` column says why
  (``"TypeError: passages: item 0 needs a str 'text'"``); every other column of that row is
  null unless listed otherwise. The other rows are unaffected: a batch that fails as a whole
  is rerun item by item. Only what cannot run at all fails the job (a factory that raises
  when an actor starts).
* ``keep_columns`` copies input columns into the output unchanged (labels, metadata).
* Bad arguments raise ValueError / TypeError naming the argument before anything is
  scheduled: ``num_actors < 1``, a ``batch_size`` that is not an int when ``num_gpus > 0``,
  a missing column (read from ``ds.columns()``, which may read the first block of a lazy
  dataset), a factory that is not callable or does not pickle, an unknown option.

Resources
---------
``num_cpus`` (default 1) and ``num_gpus`` (default 0) are reserved per actor and passed to
``map_batches``; with ``num_gpus > 0`` Ray needs an int ``batch_size``, and the factory
should put its model on the GPU (``OnnxNLI`` with onnxruntime-gpu does by itself). Leave CPUs
for the tasks that read the dataset: ``num_actors * num_cpus`` equal to every CPU of the
cluster stalls a pipeline that starts with ``read_*`` (a warning is logged when the actors
alone ask for more than the cluster has). ``runtime_env`` and ``map_kwargs`` (``memory``,
``resources``, ``accelerator_type``, ``label_selector``, ...) go to ``map_batches`` as they are.

Clusters
--------
``ray.init(address="ray://head:10001")`` (Ray Client) or ``RAY_ADDRESS=...`` (then a plain
``ray.init()``), or run the driver on the head node. Every worker needs ``rrag_kernels``
importable: install the wheel in the nodes' image, or ship it per job with
``runtime_env={"pip": ["rrag_kernels[cpu]==<version>"]}`` (or ``"py_modules"``), in
``ray.init`` or through this module's ``runtime_env``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..ops import check_bool, check_int, check_real
from ..pipelines import json_text
from ..pipelines.conformal import ClaimConformal
from ..pipelines.d2f import D2FParams, D2FReAG
from ..pipelines.mirage import MirageDefense, MirageParams
from ..pipelines.reliablerag import ReliableRAG, check_answer_options

logger = logging.getLogger("rrag_kernels")

__all__ = [
    "CONFORMAL_FILTER_COLUMNS",
    "D2F_COLUMNS",
    "DEFEND_COLUMNS",
    "RELIABLERAG_COLUMNS",
    "SCORE_COLUMNS",
    "calibrate_from_dataset",
    "collect_by_id",
    "conformal_filter_dataset",
    "d2f_dataset",
    "defend_dataset",
    "failure_summary",
    "reliablerag_dataset",
    "score_claims_dataset",
]

_INSTALL = 'pip install "rrag_kernels[ray]"'
#: map_batches arguments this module sets itself (map_kwargs may not).
_OWN_MAP_ARGS = frozenset({"fn", "batch_size", "compute", "batch_format", "zero_copy_batch", "fn_args", "fn_kwargs",
                           "fn_constructor_args", "fn_constructor_kwargs", "num_cpus", "num_gpus", "concurrency",
                           "runtime_env", "udf_modifying_row_count"})

#: Columns :func:`defend_dataset` writes after the id (``dropped`` only with ``dropped=True``).
DEFEND_COLUMNS = ("error", "question", "gate_passed", "gate_reason", "fallback", "prompt", "kept", "dropped", "stats")
#: Columns :func:`score_claims_dataset` writes after the id.
SCORE_COLUMNS = ("error", "question", "claims", "scores")
#: Columns :func:`conformal_filter_dataset` adds (``kept_claims`` when the claims column exists).
CONFORMAL_FILTER_COLUMNS = ("kept", "n_kept", "q_hat", "kept_claims", "error")
#: Columns :func:`reliablerag_dataset` writes after the id.
RELIABLERAG_COLUMNS = ("error", "question", "answer", "context_kind", "context", "context_passages", "chains",
                       "credibility", "llm_calls", "prompt_tokens", "completion_tokens", "seconds", "fallbacks")
#: Columns :func:`d2f_dataset` writes after the id.
D2F_COLUMNS = ("error", "error_type", "question", "answer", "stop_reason", "budget_bound", "decomposed", "max_level",
               "llm_calls", "prompt_tokens", "completion_tokens", "fallbacks", "retrieval_seconds", "llm_seconds",
               "total_seconds", "trace")


# --------------------------------------------------------------------------- ray, lazily


def _import_ray() -> Any:
    """``ray`` with Ray Data, or an ImportError that names the extra."""
    try:
        import pyarrow  # noqa: F401  (ray[data] brings it)
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"rrag_kernels.distributed.ray needs Ray Data (ray[data]==2.60.0): {_INSTALL} "
                          f"({exc})") from exc
    return ray


def _schemas() -> dict[str, Any]:
    """The output columns of each pipeline as Arrow fields (after the id column)."""
    import pyarrow as pa

    s, f, i, b = pa.string(), pa.float64(), pa.int64(), pa.bool_()
    claim = [("text", s), ("source", i), ("score", f), ("domain", s)]
    timings = pa.struct([(k, f) for k in ("split_s", "units_s", "kernels_s", "nli_s", "embed_s", "retrieval_s")])
    skipped = pa.list_(pa.struct([("passage", i), ("error", s)]))
    stats = pa.struct([("n_passages", i), ("skipped_passages", skipped), ("n_candidates", i), ("n_claims", i), ("n_pairs", i), ("n_kept", i),
                       ("n_support", i), ("n_contradiction", i), ("r_contr", f), ("n_domains", i), ("diversity", s),
                       ("support_share", f), ("F", f), ("gate_reason", s), ("timings", timings)])
    defend = [("error", s), ("question", s), ("gate_passed", b), ("gate_reason", s), ("fallback", s), ("prompt", s),
              ("kept", pa.list_(pa.struct(claim + [("contradicted_by", pa.list_(i))]))),
              ("dropped", pa.list_(pa.struct(claim + [("reason", s)]))), ("stats", stats)]
    score = [("error", s), ("question", s), ("claims", pa.list_(s)), ("scores", pa.list_(f))]
    seconds = pa.struct([(k, f) for k in ("kernels", "embedder", "llm", "other", "total")])
    rag = [("error", s), ("question", s), ("answer", s), ("context_kind", s), ("context", pa.list_(s)),
           ("context_passages", pa.list_(i)),
           ("chains", pa.list_(pa.struct([("triples", pa.list_(s)), ("score", f), ("finished", b)]))),
           ("credibility", pa.list_(f)), ("llm_calls", i), ("prompt_tokens", i), ("completion_tokens", i),
           ("seconds", seconds), ("fallbacks", s)]
    d2f = [("error", s), ("error_type", s), ("question", s), ("answer", s), ("stop_reason", s), ("budget_bound", b),
           ("decomposed", b), ("max_level", i), ("llm_calls", i), ("prompt_tokens", i), ("completion_tokens", i),
           ("fallbacks", i), ("retrieval_seconds", f), ("llm_seconds", f), ("total_seconds", f), ("trace", s)]
    return {"defend": defend, "score": score, "reliablerag": rag, "d2f": d2f}


# --------------------------------------------------------------------------- arguments


@dataclass(frozen=True)
class _Pool:
    """The actor pool and the map_batches arguments, checked."""

    num_actors: int
    batch_size: Any
    num_gpus: float
    num_cpus: float
    runtime_env: dict | None
    map_kwargs: dict


def _nonnegative(value: Any, name: str) -> float:
    x = check_real(value, name)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{name}: must be finite and >= 0, got {x}")
    return x


def _pool(num_actors: Any, batch_size: Any, num_gpus: Any, num_cpus: Any, runtime_env: Any, map_kwargs: Any) -> _Pool:
    num_actors = check_int(num_actors, "num_actors", minimum=1)
    num_gpus = _nonnegative(num_gpus, "num_gpus")
    num_cpus = _nonnegative(num_cpus, "num_cpus")
    if batch_size is None or (isinstance(batch_size, str) and batch_size == "auto"):
        if num_gpus > 0:
            raise ValueError(f"batch_size: must be an int when num_gpus > 0 (Ray Data needs a fixed batch on "
                             f"GPUs), got {batch_size!r}")
    else:
        batch_size = check_int(batch_size, "batch_size", minimum=1)
    if runtime_env is not None and not isinstance(runtime_env, Mapping):
        raise TypeError(f"runtime_env: expected a dict, got {type(runtime_env).__name__}")
    if map_kwargs is None:
        map_kwargs = {}
    if not isinstance(map_kwargs, Mapping):
        raise TypeError(f"map_kwargs: expected a dict, got {type(map_kwargs).__name__}")
    own = sorted(set(map_kwargs) & _OWN_MAP_ARGS)
    if own:
        raise ValueError(f"map_kwargs: {own[0]!r} is set by this function (use its own argument: num_actors, "
                         f"batch_size, num_cpus, num_gpus, runtime_env)")
    return _Pool(num_actors, batch_size, num_gpus, num_cpus,
                 dict(runtime_env) if runtime_env is not None else None, dict(map_kwargs))


def _column_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name}: expected a column name (a non-empty str), got {value!r}")
    return value


def _columns(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name}: expected a list of column names, got {type(value).__name__}")
    cols = tuple(_column_name(c, f"{name}[{k}]") for k, c in enumerate(value))
    if len(set(cols)) != len(cols):
        raise ValueError(f"{name}: a column is listed twice ({cols})")
    return cols


def _factory(value: Any, name: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not callable(value):
        raise TypeError(f"{name}: expected a zero-argument callable that builds the object in each actor, "
                        f"got {type(value).__name__}")
    return value


def _check_picklable(ray: Any, values: Mapping[str, Any]) -> None:
    """Each constructor argument must travel to the actors."""
    for name, value in values.items():
        try:
            ray.cloudpickle.dumps(value)
        except Exception as exc:
            raise TypeError(f"{name}: cannot be pickled for the Ray workers ({type(exc).__name__}: {exc}); pass a "
                            f"factory that builds it inside each actor") from exc


def _check_dataset(ray: Any, ds: Any, *, required: Sequence[str], any_of: Sequence[str] = (), id_column: str,
                   keep_columns: Sequence[str], produced: Sequence[str], what: str) -> list[str]:
    """The dataset's columns (ValueError naming the first missing or clashing one)."""
    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"ds: expected a ray.data.Dataset, got {type(ds).__name__}")
    cols = ds.columns()
    if cols is None:
        raise ValueError("ds: its columns are unknown (an empty dataset?)")
    for c in (id_column, *required, *keep_columns):
        if c not in cols:
            raise ValueError(f"ds: no column {c!r} (columns: {cols}); {what} reads {list(required)}"
                             f"{' and one of ' + str(list(any_of)) if any_of else ''}, the id column "
                             f"{id_column!r} and keep_columns")
    if any_of and not any(c in cols for c in any_of):
        raise ValueError(f"ds: no column of {list(any_of)} (columns: {cols}); {what} needs one")
    if id_column in produced:
        raise ValueError(f"id_column: {id_column!r} is a column {what} writes; rename it first")
    for c in keep_columns:
        if c in produced or c == id_column:
            raise ValueError(f"keep_columns: {c!r} is the id column or a column {what} writes ({list(produced)})")
    return list(cols)


def _warn_resources(ray: Any, pool: _Pool, what: str) -> None:
    """Log when the fixed actor pool cannot fit the cluster as it is now."""
    if not ray.is_initialized():
        return
    try:
        have = ray.cluster_resources()
    except Exception:  # a Ray Client connection that cannot answer: nothing to check against
        return
    for key, each in (("CPU", pool.num_cpus), ("GPU", pool.num_gpus)):
        need, total = pool.num_actors * each, float(have.get(key, 0.0))
        if each > 0 and need > total:
            logger.warning("%s: %d actors x %g %s = %g, but the cluster has %g %s now: the pool waits until it "
                           "has them (lower num_actors or num_%ss, or add nodes)",
                           what, pool.num_actors, each, key, need, total, key, key.lower())


def _map(ray: Any, ds: Any, worker: type, pool: _Pool, kwargs: Mapping[str, Any]) -> Any:
    extra = dict(pool.map_kwargs)
    if pool.runtime_env is not None:
        extra["runtime_env"] = pool.runtime_env
    if pool.num_gpus > 0:
        extra["num_gpus"] = pool.num_gpus
    return ds.map_batches(worker, compute=ray.data.ActorPoolStrategy(size=pool.num_actors),
                          batch_size=pool.batch_size, batch_format="pyarrow", fn_constructor_kwargs=dict(kwargs),
                          num_cpus=pool.num_cpus, udf_modifying_row_count=False, **extra)


def _run(ds: Any, worker: type, kind: str, what: str, *, required: Sequence[str], any_of: Sequence[str] = (),
         inputs: Sequence[str], pool: _Pool, id_column: str, keep_columns: tuple[str, ...],
         state: Mapping[str, Any]) -> Any:
    ray = _import_ray()
    produced = [name for name, _ in _schemas()[kind]]
    _check_dataset(ray, ds, required=required, any_of=any_of, id_column=id_column, keep_columns=keep_columns,
                   produced=produced, what=what)
    _check_picklable(ray, state)
    _warn_resources(ray, pool, what)
    return _map(ray, ds, worker, pool, {"kind": kind, "inputs": tuple(inputs), "id_column": id_column,
                                        "keep_columns": keep_columns, "state": dict(state)})


# --------------------------------------------------------------------------- the actors


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _question(row: Mapping[str, Any]) -> str | None:
    q = row.get("question")
    return q if isinstance(q, str) else None


class _Worker:
    """One actor: builds its pipeline once, then turns Arrow batches into result tables.

    ``process(rows) -> records`` runs the pipeline on a list of row dicts and returns one
    record (a dict of the output columns) per row; when it raises for the batch, each row
    is run alone and a row that raises again becomes an error row.
    """

    def __init__(self, *, kind: str, inputs: tuple[str, ...], id_column: str, keep_columns: tuple[str, ...],
                 state: dict[str, Any]) -> None:
        import pyarrow as pa

        self.pa = pa
        self.kind, self.inputs, self.id_column, self.keep_columns = kind, inputs, id_column, keep_columns
        self.schema = pa.schema(_schemas()[kind])
        self.setup(**state)

    #: The method (pipelines/_items.py's contract: ``run_batch`` and ``to_record``), set by ``setup``.
    method: Any = None
    #: Which batch call of the method the worker runs (the contract's ``run_batch``, or
    #: ConformalRAG's ``score_batch`` for scoring without a calibrator).
    batch_call: str = "run_batch"
    #: Keyword arguments of every ``to_record`` call.
    record_options: Mapping[str, Any] = {}
    #: Record fields too nested or ragged for one Arrow type: stored as JSON text.
    json_columns: tuple[str, ...] = ()
    #: Per list-of-objects field, keys an object may leave out and the value the table
    #: stores for them (a fixed schema has no "absent").
    item_defaults: Mapping[str, Mapping[str, Any]] = {}

    def setup(self, **state: Any) -> None:  # pragma: no cover - every worker defines it
        raise NotImplementedError

    def process(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The method's records, one per row, in order (a failing row is an error record
        carrying the row's question when it is a str)."""
        out = []
        for row, res in zip(rows, getattr(self.method, self.batch_call)(rows, progress=False)):
            rec = res.to_record(**self.record_options)
            if "error" in rec:
                rec["question"] = _question(row)
            for name, defaults in self.item_defaults.items():
                if isinstance(rec.get(name), list):
                    rec[name] = [{**defaults, **item} for item in rec[name]]
            for name in self.json_columns:
                if name in rec:
                    rec[name] = json_text(rec[name])  # the one record-to-JSON rule (NaN null)
            out.append(rec)
        return out

    def error_record(self, row: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
        return {"error": _error(exc), "question": _question(row)}

    def __call__(self, batch: Any) -> Any:
        present = [c for c in self.inputs if c in batch.column_names]
        rows = batch.select(present).to_pylist()
        try:
            records = self.process(rows)
            if len(records) != len(rows):
                raise RuntimeError(f"{len(records)} results for {len(rows)} rows")
        except Exception as exc:
            logger.warning("distributed.ray: a batch of %d rows failed (%s); running its rows one by one",
                           len(rows), _error(exc))
            records = []
            for row in rows:
                try:
                    (rec,) = self.process([row])
                except Exception as exc1:
                    rec = self.error_record(row, exc1)
                records.append(rec)
        table = self._table(records, rows)
        table = table.add_column(0, batch.schema.field(self.id_column), batch.column(self.id_column))
        for c in self.keep_columns:
            table = table.append_column(batch.schema.field(c), batch.column(c))
        return table

    def _table(self, records: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Any:
        """The records as a table of the fixed schema; a record Arrow cannot hold becomes an error row."""
        pa = self.pa
        try:
            return pa.Table.from_pylist(records, schema=self.schema)
        except Exception:
            fixed = []
            for rec, row in zip(records, rows):
                try:
                    pa.Table.from_pylist([rec], schema=self.schema)
                except Exception as exc:
                    logger.warning("distributed.ray: a result could not be stored: %s", _error(exc))
                    rec = self.error_record(row, RuntimeError(f"the result could not be stored ({_error(exc)})"))
                fixed.append(rec)
            return pa.Table.from_pylist(fixed, schema=self.schema)


class _DefendWorker(_Worker):
    item_defaults = {"kept": {"contradicted_by": []}}  # the CLI leaves an empty one out

    def setup(self, *, defense_factory: Callable[[], Any] | None, nli: Any, params: MirageParams | None,
              dropped: bool) -> None:
        if defense_factory is not None:
            defense = defense_factory()
            if not callable(getattr(defense, "run_batch", None)):
                raise TypeError(f"defense_factory: returned a {type(defense).__name__}, not a MirageDefense")
        else:
            defense = MirageDefense(nli=nli, params=params)
        self.method, self.record_options = defense, {"dropped": dropped}

    def error_record(self, row: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
        return {"error": _error(exc), "question": _question(row), "gate_passed": False}


class _ScoreWorker(_Worker):
    batch_call = "score_batch"

    def setup(self, *, rag_factory: Callable[[], Any]) -> None:
        rag = rag_factory()
        if not callable(getattr(rag, "score_batch", None)):
            raise TypeError(f"rag_factory: returned a {type(rag).__name__}, not a ConformalRAG")
        self.method = rag


class _ReliableRAGWorker(_Worker):
    json_columns = ("fallbacks",)

    def setup(self, *, llm_factory: Callable[[], Any], embedder_factory: Callable[[], Any],
              options: dict[str, Any]) -> None:
        self.method = ReliableRAG(llm_factory(), embedder_factory(), **options)


class _D2FWorker(_Worker):
    json_columns = ("trace",)

    def setup(self, *, llm_factory: Callable[[], Any], retriever_factory: Callable[[], Any], params: D2FParams,
              judge_llm_factory: Callable[[], Any] | None) -> None:
        judge = judge_llm_factory() if judge_llm_factory is not None else None
        self.method = D2FReAG(llm_factory(), retriever_factory(), params, judge_llm=judge)


# --------------------------------------------------------------------------- MIRAGE


def _params(params: Any, cls: type) -> Any:
    """``params`` as a validated ``cls`` (a MirageParams / D2FParams dataclass): None is the
    defaults, a dict its fields (an unknown key is a TypeError naming it)."""
    if params is None:
        params = cls()
    elif isinstance(params, Mapping):
        unknown = sorted(set(params) - set(cls.__dataclass_fields__))
        if unknown:
            raise TypeError(f"params: {unknown[0]!r} is not a {cls.__name__} field")
        params = cls(**params)
    elif not isinstance(params, cls):
        raise TypeError(f"params: expected a {cls.__name__} or a dict, got {type(params).__name__}")
    validated = params.validate()
    return validated if validated is not None else params


def defend_dataset(ds: Any, *, nli: Any = None, params: MirageParams | Mapping[str, Any] | None = None,
                   defense_factory: Callable[[], Any] | None = None, dropped: bool = False, num_actors: int = 1,
                   batch_size: int | str | None = 64, num_gpus: float = 0, num_cpus: float = 1,
                   id_column: str = "id", keep_columns: Sequence[str] = (),
                   runtime_env: Mapping[str, Any] | None = None, map_kwargs: Mapping[str, Any] | None = None) -> Any:
    """The MIRAGE defense on every row of a Ray Dataset.

    Each actor builds one :class:`~rrag_kernels.pipelines.mirage.MirageDefense` and runs
    :meth:`~rrag_kernels.pipelines.mirage.MirageDefense.defend_batch` on each batch (one
    NLI pass over the batch's claim pairs); a row's result equals the single-process one.

    Parameters
    ----------
    ds : ray.data.Dataset
        Columns ``question`` (string), ``passages`` (list of struct: ``text`` string,
        optional ``url``, ``title`` string, ``retrieval_score`` double; other fields are
        ignored) and the id column.
    nli : str, NLIScorer or None
        Each actor's judge: a name or path for :func:`rrag_kernels.models.nli.load`
        (``"lexical"``: model-free; None: the packaged judge), or a picklable scorer object.
    params : MirageParams or dict, optional
        The defense's constants (checked here, before anything runs).
    defense_factory : callable, optional
        Instead of ``nli`` / ``params``: a zero-argument callable returning the defense
        (a retriever for probing, an embedder for semantic pairing, your own scorer).
    dropped : bool
        Also write the dropped claims with their reasons.
    num_actors : int >= 1
        Size of the fixed actor pool (``ActorPoolStrategy(size=num_actors)``).
    batch_size : int, "auto" or None
        Rows per ``defend_batch`` call; an int when ``num_gpus > 0``.
    num_gpus, num_cpus : float >= 0
        Reserved per actor.
    id_column : str
    keep_columns : list of str
        Input columns copied to the output.
    runtime_env, map_kwargs : dict, optional
        Passed to ``map_batches``.

    Returns
    -------
    ray.data.Dataset
        One row per input row, the record ``rrag defend`` writes
        (:meth:`~rrag_kernels.pipelines.mirage.MirageResult.to_record`) as columns:

        ================  ===========================================================================
        <id_column>       as in the input
        error             string: why the defense failed on the row, else null
        question          string: the cleaned question (the input's on an error row)
        gate_passed       bool (false on an error row)
        gate_reason       string: ``"passed"`` or why the gate blocked
        fallback          string: null when the gate passed, else the ``on_block`` prompt's kind
        prompt            string: the checked prompt, or the fallback prompt (also on an error row)
        kept              list<struct<text: string, source: int64, score: double, domain: string,
                          contradicted_by: list<int64>>>: the kept claims (``source`` indexes the
                          row's passages; ``contradicted_by``: kept claims contradicting it, [] when
                          none, where the CLI leaves the key out)
        dropped           list<struct<text, source, score, domain, reason: string>>; only with
                          ``dropped=True`` (always null otherwise)
        stats             struct<n_passages, n_candidates, n_claims, n_pairs, n_kept, n_support,
                          n_contradiction: int64, r_contr, support_share, F: double, gate_reason:
                          string, timings: struct<split_s, kernels_s, nli_s, embed_s, retrieval_s:
                          double>> (a step that did not run has a null time)
        <keep_columns>    as in the input
        ================  ===========================================================================

    Raises
    ------
    TypeError, ValueError
        Bad arguments, a missing column, ``nli`` / ``params`` given with ``defense_factory``.
    ImportError
        Ray Data is not installed (``pip install "rrag_kernels[ray]"``).
    """
    pool = _pool(num_actors, batch_size, num_gpus, num_cpus, runtime_env, map_kwargs)
    id_column, keep = _column_name(id_column, "id_column"), _columns(keep_columns, "keep_columns")
    dropped = check_bool(dropped, "dropped")
    if defense_factory is not None:
        _factory(defense_factory, "defense_factory")
        if nli is not None or params is not None:
            raise TypeError("defense_factory: give either defense_factory or nli / params, not both")
    else:
        scorer = hasattr(nli, "predict_proba") and hasattr(nli, "labels")
        if nli is not None and not isinstance(nli, str) and not scorer:
            raise TypeError(f"nli: expected a scorer name, an NLI scorer or None, got {type(nli).__name__}")
        params = _params(params, MirageParams)
    return _run(ds, _DefendWorker, "defend", "defend_dataset", required=("question", "passages"),
                inputs=("question", "passages"), pool=pool, id_column=id_column, keep_columns=keep,
                state={"defense_factory": defense_factory, "nli": nli, "params": params, "dropped": dropped})


# --------------------------------------------------------------------------- conformal


def score_claims_dataset(ds: Any, *, rag_factory: Callable[[], Any], num_actors: int = 1,
                         batch_size: int | str | None = 64, num_gpus: float = 0, num_cpus: float = 1,
                         id_column: str = "id", keep_columns: Sequence[str] = (),
                         runtime_env: Mapping[str, Any] | None = None, map_kwargs: Mapping[str, Any] | None = None
                         ) -> Any:
    """Conformal-RAG claim scores R(c) for every row (the first half of the conformal filter).

    Each actor calls ``rag_factory()`` once (a
    :class:`~rrag_kernels.pipelines.conformal.ConformalRAG`, its calibrator may be None) and
    runs :meth:`~rrag_kernels.pipelines.conformal.ConformalRAG.score_batch` on each batch
    (retrieval per row, one fused ``claim_relevance`` call per batch). Then
    :func:`calibrate_from_dataset` computes q̂ on the driver from labelled rows and
    :func:`conformal_filter_dataset` keeps the claims with R(c) >= q̂.

    Parameters
    ----------
    ds : ray.data.Dataset
        Columns ``question`` (string), ``claims`` (list<string>) or ``response`` (string,
        split into sentences), optionally ``docs`` (list of struct ``text`` string,
        ``query_sim`` double, optional ``doc_index`` int64: already retrieved; else the
        retriever runs), and the id column. Keep ``labels`` (list<bool>, one per claim) with
        ``keep_columns=["labels"]`` to calibrate on the output.
    rag_factory : callable
        Zero-argument, returns the ``ConformalRAG`` (build the retriever and embedder inside).
    num_actors, batch_size, num_gpus, num_cpus, id_column, keep_columns, runtime_env, map_kwargs
        As for :func:`defend_dataset`.

    Returns
    -------
    ray.data.Dataset
        ``<id_column>``; ``error`` (string or null); ``question`` (string, cleaned);
        ``claims`` (list<string>, cleaned); ``scores`` (list<double>: R(c), one per claim);
        the ``keep_columns``.
    """
    pool = _pool(num_actors, batch_size, num_gpus, num_cpus, runtime_env, map_kwargs)
    id_column, keep = _column_name(id_column, "id_column"), _columns(keep_columns, "keep_columns")
    _factory(rag_factory, "rag_factory")
    return _run(ds, _ScoreWorker, "score", "score_claims_dataset", required=("question",),
                any_of=("claims", "response"), inputs=("question", "claims", "response", "docs"), pool=pool,
                id_column=id_column, keep_columns=keep, state={"rag_factory": rag_factory})


def calibrate_from_dataset(ds: Any, calibrator: ClaimConformal | None = None, *, alpha: float | None = None,
                           scores_column: str = "scores", labels_column: str = "labels",
                           group_column: str | None = None, id_column: str = "id",
                           skip_errors: bool = False) -> ClaimConformal:
    """Calibrate the claim filter on the driver from the scored, labelled rows of a dataset.

    The scores and labels are collected on the driver (``ds.select_columns`` of the id,
    scores, labels, group and ``error`` columns, as Arrow), ordered by id (so the calibration
    hash does not depend on how Ray split the data), and passed to
    :meth:`ClaimConformal.calibrate <rrag_kernels.pipelines.conformal.ClaimConformal.calibrate>`:
    q̂ is the exact ⌈(n+1)(1−α)⌉-th smallest r-score (``conformal_quantile``), the same value
    as a single-process calibration on the same responses.

    Parameters
    ----------
    ds : ray.data.Dataset
        One row per response: the id column, ``scores_column`` (list<double>) and
        ``labels_column`` (list<bool>, True = supported), of equal lengths; e.g. the output of
        :func:`score_claims_dataset` with ``keep_columns=["labels"]``, or your own scores.
    calibrator : ClaimConformal, optional
        Calibrated in place and returned; default ``ClaimConformal(alpha)``.
    alpha : float, optional
        Only without ``calibrator`` (default 0.1).
    scores_column, labels_column : str
    group_column : str, optional
        One group label per response: a group-conditional calibration.
    id_column : str
    skip_errors : bool
        Leave out the rows whose ``error`` is set (their count is logged) instead of
        refusing the dataset.

    Returns
    -------
    ClaimConformal

    Raises
    ------
    ValueError
        A missing column; an error row (unless ``skip_errors``), a null, a duplicate id or a
        row whose labels do not match its scores (a calibration set must be complete: the
        message names the ids); what ``calibrate`` refuses (an empty set, NaN scores).
    """
    if calibrator is None:
        calibrator = ClaimConformal(alpha=0.1 if alpha is None else alpha)
    elif alpha is not None:
        raise TypeError("alpha: give alpha or a calibrator, not both")
    elif not isinstance(calibrator, ClaimConformal):
        raise TypeError(f"calibrator: expected a ClaimConformal, got {type(calibrator).__name__}")
    id_column = _column_name(id_column, "id_column")
    skip_errors = check_bool(skip_errors, "skip_errors")
    scores_column = _column_name(scores_column, "scores_column")
    labels_column = _column_name(labels_column, "labels_column")
    if group_column is not None:
        group_column = _column_name(group_column, "group_column")
    ray = _import_ray()
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = [id_column, scores_column, labels_column] + ([group_column] if group_column else [])
    cols = _check_dataset(ray, ds, required=wanted[1:], id_column=id_column, keep_columns=(), produced=(),
                          what="calibrate_from_dataset")
    if "error" in cols:
        wanted.append("error")
    tables = [t for t in ds.select_columns(wanted).iter_batches(batch_size=None, batch_format="pyarrow")]
    if not tables:
        raise ValueError("ds: no rows to calibrate on")
    table = pa.concat_tables(tables).combine_chunks()
    ids = table.column(id_column)
    if pc.count_distinct(ids, mode="all").as_py() != len(ids) or ids.null_count:
        raise ValueError(f"{id_column}: the ids must be unique and not null to calibrate (duplicates: "
                         f"{_first_duplicates(ids.to_pylist())})")
    if "error" in wanted:
        bad = pc.is_valid(table.column("error"))
        if pc.any(bad).as_py() and skip_errors:
            logger.warning("calibrate_from_dataset: %d row(s) with an error left out", pc.sum(bad).as_py())
            table = table.filter(pc.invert(bad))
        elif pc.any(bad).as_py():
            failed = table.filter(bad)
            raise ValueError(f"ds: {failed.num_rows} row(s) failed upstream (a calibration set must be complete), "
                             f"e.g. id {failed.column(id_column)[0].as_py()!r}: {failed.column('error')[0].as_py()} "
                             f"(skip_errors=True leaves them out)")
    if table.num_rows == 0:
        raise ValueError("ds: no rows to calibrate on")
    table = table.sort_by(id_column)
    for c in wanted[1:3] + ([group_column] if group_column else []):
        col = table.column(c)
        if col.null_count:
            k = pc.index(pc.is_null(col), True).as_py()
            raise ValueError(f"{c}: null at id {table.column(id_column)[k].as_py()!r}")
    n_scores = pc.list_value_length(table.column(scores_column)).to_numpy(zero_copy_only=False)
    n_labels = pc.list_value_length(table.column(labels_column)).to_numpy(zero_copy_only=False)
    if (n_scores != n_labels).any():
        k = int(np.argmax(n_scores != n_labels))
        raise ValueError(f"{labels_column}: id {table.column(id_column)[k].as_py()!r} has {n_labels[k]} labels "
                         f"for {n_scores[k]} scores")
    scores = pc.list_flatten(table.column(scores_column)).to_numpy(zero_copy_only=False)
    labels = pc.list_flatten(table.column(labels_column)).to_numpy(zero_copy_only=False)
    offsets = np.concatenate([[0], np.cumsum(n_scores)]).astype(np.int64)
    groups = table.column(group_column).to_pylist() if group_column else None
    calibrator.calibrate(scores, labels, offsets, groups)
    logger.info("calibrate_from_dataset: %d responses, %d claims, q_hat %r", table.num_rows, len(scores),
                calibrator.q_hat)
    return calibrator


def _first_duplicates(ids: list[Any], k: int = 5) -> list[Any]:
    seen, dup = set(), []
    for x in ids:
        if x in seen and x not in dup:
            dup.append(x)
        seen.add(x)
    return dup[:k]


def _filter_batch(batch: Any, *, calibrator: ClaimConformal, scores_column: str, claims_column: str | None,
                  group_column: str | None) -> Any:
    """Add kept / n_kept / q_hat (/ kept_claims) / error to one Arrow batch."""
    import pyarrow as pa

    n = batch.num_rows
    scores = batch.column(scores_column).to_pylist()
    errors = batch.column("error").to_pylist() if "error" in batch.column_names else [None] * n
    groups = batch.column(group_column).to_pylist() if group_column else [None] * n
    claims = batch.column(claims_column).to_pylist() if claims_column else None
    grouped = isinstance(calibrator.q_hat, dict)
    kept: list[Any] = [None] * n
    q_hat: list[Any] = [None] * n
    todo = []
    for k in range(n):
        if errors[k] is None and scores[k] is None:
            errors[k] = f"{scores_column}: null"
        elif errors[k] is None:
            todo.append(k)

    if todo:  # the one ragged filter (ClaimConformal.filter_lists): a bad row is its own error
        masks = calibrator.filter_lists([scores[k] for k in todo], [groups[k] for k in todo] if grouped else None)
        for k, mask in zip(todo, masks):
            if isinstance(mask, Exception):
                # "score_lists[j]: ..." / "groups[j]: ...": j is the row's place in this call, so
                # the message names the dataset's column instead
                where, _, why = str(mask).partition(": ")
                column = group_column if where.startswith("groups[") else scores_column
                errors[k] = f"{type(mask).__name__}: {column}: {why}"
            else:
                kept[k] = mask.tolist()
                q_hat[k] = calibrator.q_hat_for(groups[k] if grouped else None)
    cols = {"kept": pa.array(kept, pa.list_(pa.bool_())),
            "n_kept": pa.array([None if x is None else int(sum(x)) for x in kept], pa.int64()),
            "q_hat": pa.array(q_hat, pa.float64())}
    if claims is not None:
        cols["kept_claims"] = pa.array(
            [None if kept[k] is None or claims[k] is None or len(claims[k]) != len(kept[k]) else
             [c for c, keep in zip(claims[k], kept[k]) if keep] for k in range(n)], pa.list_(pa.string()))
    cols["error"] = pa.array(errors, pa.string())
    table = batch.drop_columns([c for c in ("error",) if c in batch.column_names])
    for name, arr in cols.items():
        table = table.append_column(name, arr)
    return table


def conformal_filter_dataset(ds: Any, calibrator: ClaimConformal, *, scores_column: str = "scores",
                             claims_column: str | None = "claims", group_column: str | None = None,
                             batch_size: int | str | None = 1024, runtime_env: Mapping[str, Any] | None = None) -> Any:
    """Keep each row's claims with score >= q̂ (the second half of the conformal filter).

    Cheap and stateless: ``map_batches`` with a function on Ray tasks (the calibrator travels
    with it); one :meth:`ClaimConformal.filter
    <rrag_kernels.pipelines.conformal.ClaimConformal.filter>` call per batch.

    Parameters
    ----------
    ds : ray.data.Dataset
        ``scores_column`` (list<double>), e.g. the output of :func:`score_claims_dataset`;
        optional ``claims_column`` (list<string>), ``group_column`` (for a group-conditional
        calibrator) and ``error`` (rows with an error pass through unfiltered).
    calibrator : ClaimConformal
        Calibrated (:func:`calibrate_from_dataset`, or ``ClaimConformal.load(path)``).
    scores_column : str
    claims_column : str or None
        Used for ``kept_claims`` when the dataset has it.
    group_column : str, optional
        Required by a group-conditional calibrator.
    batch_size : int, "auto" or None
    runtime_env : dict, optional

    Returns
    -------
    ray.data.Dataset
        Every input column, plus ``kept`` (list<bool>: score >= q̂, per claim), ``n_kept``
        (int64), ``q_hat`` (double: the row's threshold), ``kept_claims`` (list<string>, when
        the claims column exists) and ``error`` (string: the input's error, or why this row
        could not be filtered, e.g. a NaN score or a group without a threshold; null
        otherwise). On an error row the new columns are null.
    """
    if not isinstance(calibrator, ClaimConformal):
        raise TypeError(f"calibrator: expected a ClaimConformal, got {type(calibrator).__name__}")
    if calibrator.q_hat is None:
        raise ValueError("calibrator: not calibrated; call calibrate_from_dataset (or load) first")
    scores_column = _column_name(scores_column, "scores_column")
    if group_column is not None:
        group_column = _column_name(group_column, "group_column")
    if isinstance(calibrator.q_hat, dict) and group_column is None:
        raise ValueError("group_column: this calibrator is group-conditional; name the column of group labels")
    if batch_size is not None and not (isinstance(batch_size, str) and batch_size == "auto"):
        batch_size = check_int(batch_size, "batch_size", minimum=1)
    if runtime_env is not None and not isinstance(runtime_env, Mapping):
        raise TypeError(f"runtime_env: expected a dict, got {type(runtime_env).__name__}")
    ray = _import_ray()
    required = [scores_column] + ([group_column] if group_column else [])
    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"ds: expected a ray.data.Dataset, got {type(ds).__name__}")
    cols = ds.columns() or []
    for c in required:
        if c not in cols:
            raise ValueError(f"ds: no column {c!r} (columns: {cols}); conformal_filter_dataset reads it")
    clash = [c for c in ("kept", "n_kept", "q_hat", "kept_claims") if c in cols]
    if clash:
        raise ValueError(f"ds: already has a column {clash[0]!r}, which conformal_filter_dataset writes")
    if claims_column is not None:
        claims_column = _column_name(claims_column, "claims_column")
        if claims_column not in cols:
            claims_column = None
    extra = {"runtime_env": dict(runtime_env)} if runtime_env is not None else {}
    return ds.map_batches(_filter_batch, batch_size=batch_size, batch_format="pyarrow",
                          fn_kwargs={"calibrator": calibrator, "scores_column": scores_column,
                                     "claims_column": claims_column, "group_column": group_column},
                          udf_modifying_row_count=False, **extra)


# --------------------------------------------------------------------------- the LLM pipelines


def reliablerag_dataset(ds: Any, *, llm_factory: Callable[[], Any], embedder_factory: Callable[[], Any],
                        num_actors: int = 1, batch_size: int | str | None = 8, num_gpus: float = 0,
                        num_cpus: float = 1, id_column: str = "id", keep_columns: Sequence[str] = (),
                        runtime_env: Mapping[str, Any] | None = None, map_kwargs: Mapping[str, Any] | None = None,
                        **options: Any) -> Any:
    """ReliableRAG (:func:`rrag_kernels.pipelines.reliablerag.answer`) on every row.

    Each actor calls ``llm_factory()`` and ``embedder_factory()`` once; each row is one
    :func:`~rrag_kernels.pipelines.reliablerag.answer` call, a row that raises an error row
    (as :func:`~rrag_kernels.pipelines.reliablerag.answer_batch`).

    Parameters
    ----------
    ds : ray.data.Dataset
        Columns ``question`` (string), ``passages`` (list of struct: ``text``, ``title``,
        optional ``triples`` list<struct<head, relation, tail: string, sentence: int64>>,
        ``label`` for oracle credibility) and the id column.
    llm_factory : callable
        Zero-argument, returns the LLM (``OpenAIChatLLM(url, ...)``: each actor has its own
        client; ``EmbeddedLLM``; a scripted test double).
    embedder_factory : callable
        Zero-argument, returns the embedder (``MiniLMEmbedder``, ``HashingEmbedder``, ...).
    num_actors, batch_size, num_gpus, num_cpus, id_column, keep_columns, runtime_env, map_kwargs
        As for :func:`defend_dataset`.
    **options
        :func:`~rrag_kernels.pipelines.reliablerag.answer`'s options (``credibility``,
        ``credibility_options``, ``context``, ``selector``, ``params``, ``extraction``,
        ``max_passages``, ``reader_max_tokens``, ``selector_options``): picklable values.

    Returns
    -------
    ray.data.Dataset
        ``<id_column>``; ``error`` (string or null); ``question``; ``answer``;
        ``context_kind`` (string); ``context`` (list<string>); ``context_passages``
        (list<int64>); ``chains`` (list<struct<triples: list<string>, score: double, finished:
        bool>>); ``credibility`` (list<double>, one per triple); ``llm_calls``,
        ``prompt_tokens``, ``completion_tokens`` (int64); ``seconds`` (struct<kernels,
        embedder, llm, other, total: double>); ``fallbacks`` (string: the JSON list of
        fallback records); the ``keep_columns`` -- the record ``rrag reliablerag`` writes.
    """
    pool = _pool(num_actors, batch_size, num_gpus, num_cpus, runtime_env, map_kwargs)
    id_column, keep = _column_name(id_column, "id_column"), _columns(keep_columns, "keep_columns")
    _factory(llm_factory, "llm_factory")
    _factory(embedder_factory, "embedder_factory")
    check_answer_options(options)  # on the driver, before any actor starts
    return _run(ds, _ReliableRAGWorker, "reliablerag", "reliablerag_dataset", required=("question", "passages"),
                inputs=("question", "passages"), pool=pool, id_column=id_column, keep_columns=keep,
                state={"llm_factory": llm_factory, "embedder_factory": embedder_factory, "options": dict(options)})


def d2f_dataset(ds: Any, *, llm_factory: Callable[[], Any], retriever_factory: Callable[[], Any],
                params: D2FParams | Mapping[str, Any] | None = None, judge_llm_factory: Callable[[], Any] | None = None,
                num_actors: int = 1, batch_size: int | str | None = 8, num_gpus: float = 0, num_cpus: float = 1,
                id_column: str = "id", keep_columns: Sequence[str] = (), runtime_env: Mapping[str, Any] | None = None,
                map_kwargs: Mapping[str, Any] | None = None) -> Any:
    """D2F-ReAG (:meth:`rrag_kernels.pipelines.d2f.D2FReAG.run_batch`) on every row.

    Each actor builds one :class:`~rrag_kernels.pipelines.d2f.D2FReAG` from
    ``llm_factory()``, ``retriever_factory()`` (and ``judge_llm_factory()``) and runs
    ``run_batch`` on each batch's questions; a question that raises is an error row.

    Parameters
    ----------
    ds : ray.data.Dataset
        Columns ``question`` (string) and the id column.
    llm_factory, retriever_factory : callable
        Zero-argument; the retriever's ``search(query, k)`` serves every question (e.g.
        ``functools.partial(corpus_retriever, passages, HashingEmbedder())``; load a large
        corpus from storage inside the factory rather than pickling it).
    params : D2FParams or dict, optional
        Checked here.
    judge_llm_factory : callable, optional
        A separate judge.
    num_actors, batch_size, num_gpus, num_cpus, id_column, keep_columns, runtime_env, map_kwargs
        As for :func:`defend_dataset`.

    Returns
    -------
    ray.data.Dataset
        ``<id_column>``; ``error`` (string ``"<type>: <message>"`` or null); ``error_type``
        (string); ``question``; ``answer``; ``stop_reason`` (string); ``budget_bound``,
        ``decomposed`` (bool); ``max_level``, ``llm_calls``, ``prompt_tokens``,
        ``completion_tokens``, ``fallbacks`` (int64); ``retrieval_seconds``, ``llm_seconds``,
        ``total_seconds`` (double); ``trace`` (string: the JSON of
        :meth:`D2FResult.to_dict <rrag_kernels.pipelines.d2f.D2FResult.to_dict>` without
        ``index``: every node, the order, the params); the ``keep_columns``.
    """
    pool = _pool(num_actors, batch_size, num_gpus, num_cpus, runtime_env, map_kwargs)
    id_column, keep = _column_name(id_column, "id_column"), _columns(keep_columns, "keep_columns")
    _factory(llm_factory, "llm_factory")
    _factory(retriever_factory, "retriever_factory")
    _factory(judge_llm_factory, "judge_llm_factory", optional=True)
    params = _params(params, D2FParams)
    return _run(ds, _D2FWorker, "d2f", "d2f_dataset", required=("question",), inputs=("question",), pool=pool,
                id_column=id_column, keep_columns=keep,
                state={"llm_factory": llm_factory, "retriever_factory": retriever_factory, "params": params,
                       "judge_llm_factory": judge_llm_factory})


# --------------------------------------------------------------------------- on the driver


def collect_by_id(ds: Any, *, id_column: str = "id", order: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Every row of ``ds`` on the driver, in order.

    Parameters
    ----------
    ds : ray.data.Dataset or list of dict
        A result of this module (or rows already taken).
    id_column : str
    order : sequence, optional
        The input's ids in the order wanted (e.g. the order of the rows given to
        ``ray.data.from_items``); default: sorted by id.

    Returns
    -------
    list of dict
        One dict per row (Python values: lists, dicts, None).

    Raises
    ------
    ValueError
        An id appears twice, or (with ``order``) an id of ``order`` did not come back or one
        came back that ``order`` does not hold: count in = count out is checked here.
    """
    id_column = _column_name(id_column, "id_column")
    rows = list(ds) if isinstance(ds, list) else ds.take_all()
    index: dict[Any, dict[str, Any]] = {}
    for row in rows:
        key = row[id_column]
        if key in index:
            raise ValueError(f"{id_column}: id {key!r} appears more than once")
        index[key] = row
    if order is None:
        try:
            return [index[k] for k in sorted(index)]
        except TypeError as exc:
            raise ValueError(f"{id_column}: the ids cannot be sorted ({exc}); pass order=") from exc
    order = list(order)
    missing = [k for k in order if k not in index]
    wanted = set(order)
    extra = [k for k in index if k not in wanted]
    if missing or extra or len(wanted) != len(order):
        raise ValueError(f"order: {len(order)} ids given, {len(index)} rows came back; missing {missing[:5]}, "
                         f"unexpected {extra[:5]}")
    return [index[k] for k in order]


def failure_summary(rows: Sequence[Mapping[str, Any]], *, id_column: str = "id") -> dict[str, Any]:
    """How many rows failed and why: ``{"n", "n_ok", "n_errors", "errors": [{id, "error"}]}``.

    ``rows``: rows of a result (e.g. :func:`collect_by_id`'s); a row failed when its
    ``error`` is not null. The count is also logged at INFO.
    """
    id_column = _column_name(id_column, "id_column")
    errors = [{id_column: r.get(id_column), "error": r["error"]} for r in rows if r.get("error") is not None]
    out = {"n": len(rows), "n_ok": len(rows) - len(errors), "n_errors": len(errors), "errors": errors}
    logger.info("distributed.ray: %d rows, %d ok, %d errors", out["n"], out["n_ok"], out["n_errors"])
    return out
