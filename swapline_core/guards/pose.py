"""Head pose (yaw, pitch, roll in degrees) from five facial points, and the five points from 68.

A generic head (millimetres: pupils 64 apart, nose tip 22 in front of them and 34 below, mouth
corners 50 apart, 68 below the eyes and 20 behind the nose tip; anthropometric averages, not fitted
to anyone) is posed onto the points with OpenCV's SQPnP under a long-focal (near-orthographic)
camera, so the estimate needs no frame size and no calibration. Accuracy is that of a generic
head: fine for "frontal / three-quarter / profile", not for animation.

Signs: yaw > 0 when the face turns toward image-right (its nose points right), pitch > 0 when
it looks down, roll > 0 when the eye line tilts clockwise on screen.
"""
from __future__ import annotations

import cv2
import numpy as np

# Object points in a camera-like frame: x right, y down, z away from the camera.
_HEAD5 = np.array([[-32.0, -34.0, 22.0], [32.0, -34.0, 22.0], [0.0, 0.0, 0.0],
                   [-25.0, 34.0, 20.0], [25.0, 34.0, 20.0]], np.float64)


def five_from_68(pts68: np.ndarray) -> np.ndarray:
    """Pupils (eye contour centres), nose tip and mouth corners from dlib's 68 points."""
    p = np.asarray(pts68, np.float64)
    return np.stack([p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]])


def head_pose(kps5: np.ndarray) -> tuple[float, float, float]:
    """(yaw, pitch, roll) in degrees for five points in InsightFace order; NaN when the points
    cannot be posed (non-finite, or no spread), which the guards refuse."""
    pts = np.asarray(kps5, np.float64).reshape(5, 2)
    nan = float("nan"), float("nan"), float("nan")
    if not np.all(np.isfinite(pts)):
        return nan
    span = pts.max(axis=0) - pts.min(axis=0)
    size = max(float(span[0]), float(span[1]), 1.0)
    f = 20.0 * size                       # ~ a telephoto view: perspective hardly matters
    centre = pts.mean(axis=0)
    cam = np.array([[f, 0, centre[0]], [0, f, centre[1]], [0, 0, 1]], np.float64)
    try:
        ok, rvec, _ = cv2.solvePnP(_HEAD5, pts, cam, None, flags=cv2.SOLVEPNP_SQPNP)
    except cv2.error:          # SQPnP asserts on points without spread (all on one spot)
        return nan
    if not ok:
        return nan
    rot, _ = cv2.Rodrigues(rvec)
    fwd = rot @ np.array([0.0, 0.0, -1.0])     # where the face looks (toward the camera: -z)
    yaw = np.degrees(np.arctan2(fwd[0], -fwd[2]))
    pitch = np.degrees(np.arctan2(fwd[1], np.hypot(fwd[0], fwd[2])))
    right = rot @ np.array([1.0, 0.0, 0.0])
    roll = np.degrees(np.arctan2(right[1], right[0]))
    return float(yaw), float(pitch), float(roll)
