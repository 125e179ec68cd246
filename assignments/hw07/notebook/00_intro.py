# %% [markdown]
# # Homework 7 — Batching and Training Memory
#
# This homework follows Handout #7. You will write small functions that make a
# training loop's state explicit: which execution mode is active, what each axis
# of a batch means, which shapes broadcast into the wrong objective, what
# occupies memory during a step, how to keep the objective while shrinking the
# live batch, and how a language model's loss counts its tokens.
#
# **How to work.** Each exercise gives a stub whose body raises
# `NotImplementedError`. Replace the body; keep the function's name and
# signature (the grader calls them by name). Run `grader.check("qN")` after an
# exercise for public feedback: those checks test shapes and one small worked
# example. Hidden tests decide the score: fresh random cases, edge cases, and
# the mistakes the handout warns about.
#
# Keep each graded function self-contained: it may use the imports below and
# constants with literal values, but not variables created elsewhere in the
# notebook. The grader also runs your definitions on their own, apart from
# the rest of the notebook, and the lower of the two scores counts.
#
# Everything runs on a CPU in seconds. `memprobe.py`, next to this notebook,
# measures tensor memory the same way the grader does.

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

_ = torch.manual_seed(0)
