from fsbench._entry import main

main()
