"""Left-right symmetry of MediaPipe's 468-point face mesh: which vertex mirrors which.

The mesh is symmetric about the face's midline: each vertex has a partner on the other half
(28 midline vertices, nose bridge to chin, are their own). The partner table comes from the
model itself, since the canonical face model (its 3-D coordinates) is not among the files the
pack extracts: the mesh was run on six faces' crops (the shipped source photos, the target
reference and three frames of the sample clip) and on the same crops mirrored; vertex i of the
mirrored run, reflected back, lands on the partner of i, and a min-cost assignment over the summed
distances paired them (mean 1.4 px in the 192 px crop). Checked by
tests/unit/backends/test_mesh_swap.py: an involution; its fixed points are MediaPipe's midline
vertices; it agrees with the iris table's left/right eye pairs (``face_mesh.EYE_REFINED``); pairs
lie on opposite sides of the midline on a frontal face.

The triangle list is symmetric too except for six quads split along the other diagonal on one side
(e.g. 247-246-161-30 against 467-466-388-260): the mirror of a triangle is therefore taken as its
three partner vertices, which always exist, not looked up in the list.
"""
from __future__ import annotations

import numpy as np

MIRROR468 = (
    0, 1, 2, 248, 4, 5, 6, 249, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    250, 251, 252, 253, 254, 255, 256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269,
    270, 271, 272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287, 288, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309,
    310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 322, 323, 94, 324, 325, 326, 327, 328,
    329, 330, 331, 332, 333, 334, 335, 336, 337, 338, 339, 340, 341, 342, 343, 344, 345, 346, 347, 348,
    349, 350, 351, 352, 353, 354, 355, 356, 357, 358, 359, 360, 361, 362, 363, 364, 365, 366, 367, 368,
    369, 370, 371, 372, 373, 374, 375, 376, 377, 378, 379, 151, 152, 380, 381, 382, 383, 384, 385, 386,
    387, 388, 389, 390, 164, 391, 392, 393, 168, 394, 395, 396, 397, 398, 399, 175, 400, 401, 402, 403,
    404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 195, 419, 197, 420, 199,
    200, 421, 422, 423, 424, 425, 426, 427, 428, 429, 430, 431, 432, 433, 434, 435, 436, 437, 438, 439,
    440, 441, 442, 443, 444, 445, 446, 447, 448, 449, 450, 451, 452, 453, 454, 455, 456, 457, 458, 459,
    460, 461, 462, 463, 464, 465, 466, 467, 3, 7, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69,
    70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,
    90, 91, 92, 93, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110,
    111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130,
    131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150,
    153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 165, 166, 167, 169, 170, 171, 172, 173, 174,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 196,
    198, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219,
    220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247,
)
# the midline (MediaPipe's canonical model has x = 0 there)
MIDLINE = tuple(i for i, j in enumerate(MIRROR468) if i == j)


def mirror_map() -> np.ndarray:
    """(468,) int32: the partner of each vertex across the face's midline."""
    return np.asarray(MIRROR468, np.int32)
