from autoheur.cli import main

raise SystemExit(main())
