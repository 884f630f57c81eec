"""The head's web dashboard: the cluster, its actors, flows, recoveries and lineage store, live.

``history.py`` and ``recoveries.py`` keep what the head has seen (pure, testable without sockets);
``flows.py`` and ``pages.py`` turn it into what each page shows; ``server.py`` serves it over HTTP
(aiohttp, on the head's own event loop) behind the cluster token (``auth.py``); ``static/`` holds
the page itself.
"""
