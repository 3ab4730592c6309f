"""thinkwire: load with `mitmdump -s addon/think.py`.

Moves inline reasoning markup (<think>...</think> and its cousins) into each API's native
reasoning field as responses pass through. See README.md for options and recipes.
"""

import os
import sys

# mitmdump puts this folder on sys.path already; this also covers other loaders.
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

from thinkwire.addon import ThinkWire  # noqa: E402

addons = [ThinkWire()]
