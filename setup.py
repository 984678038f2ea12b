"""Packages the pipeline code so Beam workers and TFX executors can import it.

Beam runners receive it with ``--setup_file=./setup.py``; locally it is installed
in editable mode by ``make setup``. Exact versions live in ``requirements.lock``.
"""
import setuptools

setuptools.setup(
    name="watchtime-ranker",
    version="0.1.0",
    description="TFX pipeline ranking short videos by click and watch time",
    # watchtime_ranker: the custom artifact types under their KFP v2 schema titles
    # (watchtime_ranker.<Name>), which the KFP v2 container entry point imports.
    packages=setuptools.find_packages(include=["pipeline*", "components*", "models*", "serving*", "data*", "schemas*",
                                               "watchtime_ranker*"]),
    package_data={"": ["*.pbtxt"]},
    python_requires=">=3.10,<3.11",
    install_requires=[
        "tfx[kfp]==1.16.0",
        "tensorflow==2.16.2",
        "tf-keras==2.16.0",
        "tensorflow-transform==1.16.0",
        "tensorflow-model-analysis==0.47.1",
        "tensorflow-recommenders",
        "apache-beam[gcp]==2.61.0",  # TFT 1.16 deep_copy breaks on Beam >= 2.7x (multi-phase analyzers)
        "numpy<2",
        "isal",  # LogExampleGen's gzip writer (record_files.py); zlib when absent
        "pandas",
        "matplotlib",
    ],
)
