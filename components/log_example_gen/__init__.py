"""LogExampleGen: custom Beam ExampleGen for KuaiRand-Pure-format logs.

Import the component from ``components.log_example_gen.component`` (it imports TFX)
and its knobs from ``components.log_example_gen.config``; the pure modules (config,
parsing, history, time_split) import neither Beam nor TFX.
"""
