"""``python -m latscope``: the ``latscope`` command (:func:`latscope.cli.main`); Ctrl-C while
it loads gives one line and status 130, as it does later."""

import sys

try:
    from latscope.cli import main
except KeyboardInterrupt:
    print("latscope: interrupted (Ctrl-C)", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
