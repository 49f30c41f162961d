"""Adapters for RAG frameworks (the face of ``integrations/``; imports no framework).

Each framework has its own module and optional extra; importing a module without its
framework raises an ImportError naming the extra to install.

==============================================  ==========================  ===========================================
module                                          extra                       what it gives
==============================================  ==========================  ===========================================
:mod:`rrag_kernels.integrations.langchain`      ``rrag_kernels[langchain]``  ``MirageCompressor``, ``ConformalCompressor``
                                                                            (``BaseDocumentCompressor``),
                                                                            ``DefendedRetriever`` (``BaseRetriever``),
                                                                            ``D2FRunnable`` (``Runnable``),
                                                                            ``RRAGEmbeddings`` (``Embeddings``)
:mod:`rrag_kernels.integrations.llamaindex`     ``rrag_kernels[llamaindex]`` ``MiragePostprocessor``,
                                                                            ``ConformalPostprocessor``
                                                                            (``BaseNodePostprocessor``)
:mod:`rrag_kernels.integrations.haystack`       ``rrag_kernels[haystack]``   ``MirageDocumentFilter``,
                                                                            ``ConformalDocumentFilter`` (``@component``)
==============================================  ==========================  ===========================================

Every adapter returns new framework objects (the input documents are never changed) with
our scores and decisions under the one metadata key :data:`METADATA_KEY` (``"rrag"``):
``method`` ("mirage", "conformal", "d2f"), the ``kept`` and ``dropped`` claims of that
document (text, score, reason), its ``score`` (the best kept claim's) and, for MIRAGE,
``gate_passed`` / ``fallback`` / the gate's ``stats``. By default a kept document's text is
rewritten to its kept claims (``output="claims"``); ``output="documents"`` keeps the text.
The adapters sit above the pipelines and import only their faces.
"""

from __future__ import annotations

#: The one metadata key every adapter writes its decisions under.
METADATA_KEY = "rrag"
#: The framework modules and the extra each needs.
FRAMEWORKS = {"langchain": "langchain", "llamaindex": "llamaindex", "haystack": "haystack"}

__all__ = ["FRAMEWORKS", "METADATA_KEY"]
