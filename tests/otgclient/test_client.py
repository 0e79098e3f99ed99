"""A server that cannot be reached is one line in words: what failed, and whether nothing listens
there (``refused``: a controller marks such an agent down at once) or it did not answer."""
from __future__ import annotations

import socket
import threading

import pytest

from netrig.otgclient.client import OtgClient, OtgDown


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_refused_in_words():
    c = OtgClient("agent a", f"http://127.0.0.1:{closed_port()}", None, None)
    with pytest.raises(OtgDown) as e:
        c.call("GET", "/config")
    assert e.value.refused
    assert str(e.value).endswith("): connection refused: nothing listens there"), e.value


def test_a_server_that_accepts_and_never_answers_is_a_timeout_not_a_refusal():
    with socket.socket() as listener:  # the kernel accepts; nobody reads: a stopped host
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        c = OtgClient("agent b", f"http://127.0.0.1:{listener.getsockname()[1]}", None, None)
        with pytest.raises(OtgDown) as e:
            c.call("GET", "/config", timeout=0.2)
    assert not e.value.refused
    assert "no answer in time" in str(e.value) and "agent b (http://127.0.0.1:" in str(e.value), e.value


def test_a_server_that_closes_mid_answer_says_it_stopped():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def half_answer() -> None:
            conn, _ = listener.accept()
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{")
            conn.close()

        t = threading.Thread(target=half_answer)
        t.start()
        c = OtgClient("agent c", f"http://127.0.0.1:{listener.getsockname()[1]}", None, None)
        with pytest.raises(OtgDown) as e:
            c.call("GET", "/config")
        t.join()
    assert "the connection closed before the answer" in str(e.value), e.value
