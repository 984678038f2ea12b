"""Test setup: Keras 2 (tf-keras) everywhere, quiet TF, shared paths."""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KUAIRAND_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "kuairand-pure")
