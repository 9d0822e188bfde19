"""The 68 points of dlib's layout (iBUG 300-W order) read off MediaPipe's 468-point face mesh.

Each of the 68 points is one mesh vertex or the midpoint of one mesh edge (two vertices that share
a triangle): a fixed map on the mesh's topology, nothing fitted per face, no weights. It started
from the published semantic correspondence (jaw on the face oval, brows on the brow contour, eyes
on the eye contours, lips on the lip contours) and, point by point, took the vertex or edge
midpoint closest to the built-in dlib predictor's point where that lowered the median distance by
more than 0.5 % of the inter-ocular distance, on frames not used to evaluate it (the ltx2,
dual-characters and infinitetalk clips, Tom_Hanks_54745.png). Only vertex indices are kept.

Agreement with dlib's 68 points, median distance in inter-ocular units (dlib's eye centres), on
t1.jpg's faces and every fourth frame of the sample clip: see docs/models.md. The jaw is where
they differ most: dlib marks the visible outline, the mesh's face-oval vertices sit on the 3-D
surface and slide inwards as the head turns.
"""
from __future__ import annotations

import numpy as np

INDEX: tuple[tuple[int, ...], ...] = (
    # 0-16 jaw, image-left to image-right
    (143,), (111, 123), (123, 187), (58, 215), (135, 138), (136, 150), (149, 176), (148,), (152,),
    (377, 400), (378,), (365, 379), (397,), (288, 435), (361, 366), (454,), (356, 389),
    # 17-21 the subject's right brow (image-left), 22-26 the left brow
    (71,), (63, 68), (104, 105), (66,), (107,),
    (9, 285), (296, 336), (296, 334), (293,), (300, 301),
    # 27-30 nose bridge, 31-35 nose base
    (122, 168), (6, 196), (51, 195), (4,),
    (235, 240), (99,), (2,), (326, 462), (327, 328),
    # 36-41 right eye (image-left), 42-47 left eye: corners, upper lid, lower lid
    (130,), (160,), (158,), (155,), (22, 145), (110, 144),
    (256, 382), (385,), (387,), (255, 359), (339, 373), (252, 374),
    # 48-59 outer lips, 60-67 inner lips
    (61,), (39, 40), (37,), (0,), (267,), (269,), (291,), (405,), (314, 315), (17,), (84,), (91, 181),
    (78, 95), (38, 41), (13, 82), (268,), (307,), (317,), (14,), (87,),
)
_A = np.array([ix[0] for ix in INDEX])
_B = np.array([ix[-1] for ix in INDEX])


def from_mesh(mesh: np.ndarray) -> np.ndarray:
    """(68, 2) float32 points from a (468, 2 or 3) mesh in image coordinates."""
    p = np.asarray(mesh, np.float64)[:, :2]
    return ((p[_A] + p[_B]) / 2).astype(np.float32)
