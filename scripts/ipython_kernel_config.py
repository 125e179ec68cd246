# Installed by `make install` into the venv (<venv>/etc/ipython/), where every IPython kernel of the
# project reads it. ipykernel 7 logs a warning at every start when it runs over TCP without CurveZMQ
# keys; otter's export cell starts such a kernel and shows that warning to students in red. The
# kernels here run on localhost only, so the warning says nothing a student can act on.
c = get_config()  # noqa: F821
c.IPKernelApp.log_level = "ERROR"
