"""What recpipe's framework adapters (``recpipe.torch``, ``recpipe.mx``) share, below both:
gluon's dataset transforms (``transformed``) and the tail every front over an ``ImageLoader``
hands to it (``facade``). Nothing here imports torch or MXNet."""

__all__: list = []
