"""Thin pipelines: text in, arrays through the kernels, readable results out.

Models and services sit behind small protocols (:mod:`.protocols`) so that any embedder,
NLI scorer or retriever can be plugged in; every default works offline.
"""
