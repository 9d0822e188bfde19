"""The generate stage: one chunk of frames through landmarks, guards, swapper, masks and paste."""
