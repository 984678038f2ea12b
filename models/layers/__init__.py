from models.layers import autograph_rules  # noqa: F401  (AutoGraph skips tf_keras: autograph_rules.py)
