"""Neural face swappers by family (INSwapper/ReSwapper, HyperSwap, GHOST, SimSwap, HiFiFace,
BlendSwap, UniFace): signatures in families.py, one shared runner in runner.py."""
from .families import FAMILIES, FamilySpec, detect_family, known_signatures
from .runner import FamilySwapper

__all__ = ["FAMILIES", "FamilySpec", "FamilySwapper", "detect_family", "known_signatures"]
