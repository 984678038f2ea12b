"""``python -m data --out DIR ...`` is the same as ``python -m data.simulator``."""
import sys

from data.simulator import main

sys.exit(main())
