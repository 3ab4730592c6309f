"""thinkwire: load with `mitmdump -s addon/think.py` (a clone) or
`mitmdump -s "$(thinkwire addon-path)"` (an install, which ships this file as
thinkwire/script/think.py).

Moves inline reasoning markup (<think>...</think> and its cousins) into each API's native
reasoning field as responses pass through. See README.md and docs/ (docs/options.md: the options).
"""

import os
import sys

# The folder that holds the thinkwire package: this file's own in a clone (addon/), two levels
# up in an install. Appended, so a mitmproxy of another install keeps its own libraries and
# takes from thinkwire's only what it lacks (thinkwire itself, pyyaml).
_here = os.path.dirname(os.path.realpath(__file__))
_root = _here if os.path.isdir(os.path.join(_here, "thinkwire")) else os.path.dirname(os.path.dirname(_here))
if _root not in sys.path:
    sys.path.append(_root)

from thinkwire.addon import ThinkWire  # noqa: E402

addons = [ThinkWire()]
