"""The worker: the process that imports and calls the submission, and the parent's side of it. spawn.py starts
it in its jail; server.py is its loop (the untrusted side); client.py is the parent's handle on it (requests,
replies, timeouts, restarts); messages.py the typed requests and replies; channel.py and tensorwire.py carry them
(framed JSON over a unix socket, tensors in sealed memfds)."""
