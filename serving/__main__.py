"""``python -m serving --model_base_path ... --model_name ... --port 8501``: see serving.cli."""
import sys

from serving.cli import main

sys.exit(main())
