"""The run loop's parts (brains, phases, self-play, policies, outputs, threads); TrainerController composes them."""
