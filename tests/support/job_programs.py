"""Test helper: pieces of the Python programs the sandbox tests run inside a job (tests import
it; it is not a conftest)."""

#: ``attempt(label, fn)`` prints ``label ok`` or ``label blocked ERRNO_NAME``
ATTEMPT = r"""
import errno
def attempt(label, fn):
    try:
        fn(); print(label, "ok")
    except OSError as e:
        print(label, "blocked", errno.errorcode.get(e.errno, e.errno))
"""
