from models.heads._all import *  # noqa: F401,F403
