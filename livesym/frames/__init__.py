"""From a raw sample to frame ids: the one way a sample becomes frames.

A sampler's raw sample (registers and a stack copy, or return addresses, kernel
addresses, a system call, Python frames read at the sample) is unwound, each address
named against the maps generation of the sample's time, the kernel's, the system
call's and the Python frames put in place, and how the stack ended said by its last
frame (``sample_frames.SampleFrames``). The result is ids in the session's frame and
stack tables (``table.FrameTable``); the engine only routes samples here and the ids
to the profile.
"""
