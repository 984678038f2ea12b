"""``python -m data.simulator --out DIR ...`` (see ``data.simulator.cli``)."""
import sys

from data.simulator.cli import main

sys.exit(main())
