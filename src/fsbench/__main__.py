from fsbench.cli import main

main()
