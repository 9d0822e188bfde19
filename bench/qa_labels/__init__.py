"""The labelled set of issue 48: swapped faces judged by eye, the ruler for the QA gate.

``build`` runs clips x sources through the shipped workflow with the gate set to *flag only* (every
swapped face is delivered) and writes, per sampled face, a target | result crop pair and the gate's
own record of it; ``sheets`` lays the pairs out, numbered and with nothing else on them, for a
person to label; ``labels`` reads and checks the labels. The set lives in ``bench/qa_labels/set/``:
``faces.jsonl.gz`` (provenance), ``crops/`` (what was labelled), ``gate.jsonl.gz`` (the gate's metrics,
never shown to a labeller) and ``labels.jsonl``. The protocol is in docs/qa.md.
"""
