"""What the process finds around it: the machine (``host``: cores, memory, ranks per node), the
environment variables recpipe reads (``env``) and the distributed job it is one rank of
(``distributed``). Nothing here imports the rest of recpipe."""
