"""68-point shape geometry shared by the classical swapper, the guards and the QA gate.

``MEAN68`` is a mean dlib 68-point face, eye centres at (-0.5, 0) and (0.5, 0), printed by
``calibration/mean_shape68.py`` (Procrustes mean over the faces of t1.jpg, Tom Hanks and the sample
clips, made symmetric; 8 identities). It is a reference for "does this look like a face" residuals and the
layout the classical swap's fixed triangulation is built on.
"""
from __future__ import annotations

import numpy as np

# Index permutation that maps dlib's 68 points onto themselves under a horizontal flip.
MIRROR68 = np.array(list(range(16, -1, -1)) + list(range(26, 16, -1)) + [27, 28, 29, 30]
                    + [35, 34, 33, 32, 31] + [45, 44, 43, 42, 47, 46, 39, 38, 37, 36, 41, 40]
                    + [54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55] + [64, 63, 62, 61, 60]
                    + [67, 66, 65])

MEAN68 = np.array([
    [-1.2209, -0.0173], [-1.2220, 0.2999], [-1.1983, 0.6245], [-1.1268, 0.9407],
    [-0.9890, 1.2306], [-0.7890, 1.4985], [-0.5615, 1.7346], [-0.3085, 1.9382],
    [0.0004, 1.9962], [0.3097, 1.9385], [0.5635, 1.7352], [0.7919, 1.4994],
    [0.9926, 1.2316], [1.1309, 0.9415], [1.2024, 0.6249], [1.2261, 0.2997],
    [1.2252, -0.0179], [-0.9257, -0.2851], [-0.7716, -0.3935], [-0.5759, -0.4187],
    [-0.3744, -0.3803], [-0.1874, -0.2947], [0.1863, -0.2948], [0.3736, -0.3804],
    [0.5754, -0.4187], [0.7717, -0.3933], [0.9265, -0.2849], [-0.0007, -0.0415],
    [-0.0008, 0.1673], [-0.0011, 0.3849], [-0.0012, 0.5906], [-0.2352, 0.7375],
    [-0.1234, 0.7889], [-0.0007, 0.8295], [0.1221, 0.7889], [0.2341, 0.7375],
    [-0.6949, -0.0023], [-0.5671, -0.0511], [-0.4257, -0.0538], [-0.2991, 0.0150],
    [-0.4343, 0.0481], [-0.5789, 0.0441], [0.2990, 0.0151], [0.4256, -0.0538],
    [0.5671, -0.0511], [0.6952, -0.0023], [0.5789, 0.0441], [0.4341, 0.0481],
    [-0.4564, 1.1180], [-0.2905, 1.0367], [-0.1217, 1.0005], [-0.0005, 1.0376],
    [0.1207, 1.0005], [0.2902, 1.0366], [0.4571, 1.1178], [0.2989, 1.3056],
    [0.1337, 1.3962], [-0.0002, 1.4104], [-0.1340, 1.3962], [-0.2989, 1.3056],
    [-0.3780, 1.1318], [-0.1211, 1.1133], [-0.0005, 1.1255], [0.1204, 1.1133],
    [0.3786, 1.1316], [0.1241, 1.2128], [-0.0003, 1.2307], [-0.1247, 1.2128],
], np.float32)


# Per eye: the two lid pairs (upper, lower) and the corners.
EYE_PAIRS = (((37, 41), (38, 40), (36, 39)), ((43, 47), (44, 46), (42, 45)))


def eye_aspect(lm: np.ndarray) -> np.ndarray:
    """Each eye's lid opening over its width (36-41, 42-47): 0 closed, ~0.3 wide open."""
    lm = np.asarray(lm, np.float64)
    vals = []
    for (p1, p2, (c0, c1)) in EYE_PAIRS:
        width = max(float(np.linalg.norm(lm[c1] - lm[c0])), 1e-6)
        vals.append((np.linalg.norm(lm[p1[0]] - lm[p1[1]]) + np.linalg.norm(lm[p2[0]] - lm[p2[1]])) / (2 * width))
    return np.asarray(vals, np.float64)
