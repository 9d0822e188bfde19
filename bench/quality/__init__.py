"""Swap quality on known-truth cases (issue 13's `quality` section of scripts/bench.sh).

cases.py builds clips whose truth is known by construction (occluders with exact pixel masks,
a face scaled into a full-body-sized canvas, two shots joined by a hard cut); score.py measures
the result with a scorer that shares no code with the pipeline's detector path (dlib HOG +
68-point shape predictor, while the pipeline detects with MTCNN); run.py runs the real video
stages (Track Faces -> Swap Faces in Frames) on each case and reports the metrics and targets.
"""
