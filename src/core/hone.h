/* hone.h — libhone's public API in one include. */
#pragma once

#include "hone-error.h"
#include "hone-dtype.h"
#include "hone-tensor.h"
#include "hone-gguf.h"
#include "hone-model.h"
#include "hone-tokenizer.h"
#include "hone-chat-template.h"
#include "hone-backend.h"
#include "hone-sampler.h"
#include "hone-metrics.h"
#include "hone-model-info.h"
#include "hone-engine.h"
#include "hone-bench.h"
#include "hone-default-model.h"
