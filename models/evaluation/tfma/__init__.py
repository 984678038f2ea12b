from models.evaluation.tfma._all import *  # noqa: F401,F403
from models.evaluation.tfma._all import _hash  # noqa: F401
