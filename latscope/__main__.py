from latscope.cli import main

raise SystemExit(main())
