"""``python -m world --write configs/world`` / ``--show life-easy``: the preset YAMLs (world.config).

(``python -m world.config`` runs the same code, but Python warns there: the package's ``__init__``
has imported ``world.config`` already.)"""

from world.config import _main

_main(prog="python -m world")
