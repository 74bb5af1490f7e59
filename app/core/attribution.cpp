#include "app/core/attribution.h"

namespace app {

model::Result<SidesAttribution> AttributeAt(model::Engine& engine, const std::vector<int32_t>& ids, const std::vector<model::MapSide>& sides,
                                            int64_t position, LensTarget target) {
    if (sides.empty() || sides[0] != model::MapSide::Ssa) return model::Fail("the attribution reads SSA's prediction first");
    SidesAttribution out;
    out.position = position;
    for (model::MapSide side : sides) {
        auto at = engine.RunLensAt(ids, side, position, out.token);
        if (!at) return model::Fail(at.error());
        if (side == model::MapSide::Ssa && at->top_k > 0 && !at->top_ids.empty()) {
            // SSA's ranking after its last layer (the model's own prediction), most likely first.
            const int32_t* ranked = at->top_ids.data() + at->top_ids.size() - static_cast<size_t>(at->top_k);
            if (target == LensTarget::Top || at->target < 0) {
                out.target = LensTarget::Top;
                if (ranked[0] != at->target) at = engine.RunLensAt(ids, side, position, ranked[0]);
                if (!at) return model::Fail(at.error());
            } else if (target == LensTarget::NextAgainstOther) {
                out.versus = ranked[0] != at->target ? ranked[0] : at->top_k > 1 ? ranked[1] : -1;
                // A vocabulary of one token has no other: the next token's logit, named as such.
                out.target = out.versus >= 0 ? LensTarget::NextAgainstOther : LensTarget::Next;
            }
            out.token = at->target;
        }
        if (out.versus >= 0) {  // the next token's parts and logit less the other token's
            auto other = engine.RunLensAt(ids, side, position, out.versus);
            if (!other) return model::Fail(other.error());
            for (size_t i = 0; i < at->parts.size() && i < other->parts.size(); ++i) at->parts[i] -= other->parts[i];
            at->logit -= other->logit;
            at->free -= other->free;  // the divisor is the position's, one for both tokens
        }
        out.sides.push_back(std::move(*at));
    }
    return out;
}

}  // namespace app
