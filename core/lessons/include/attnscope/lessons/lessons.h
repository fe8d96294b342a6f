// Every core lesson (one header each); for code that shows all of them, such as the app's lesson state.
#pragma once

#include "attnscope/lessons/additive.h"
#include "attnscope/lessons/heads.h"
#include "attnscope/lessons/image_patches.h"
#include "attnscope/lessons/masks.h"
#include "attnscope/lessons/scaling.h"
#include "attnscope/lessons/two_formulas.h"
#include "attnscope/lessons/vector_view.h"
