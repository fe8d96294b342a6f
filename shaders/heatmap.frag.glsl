#version 330 core
// Heatmap cells: one texel of uValues per matrix entry (raw float values), mapped to colour through the
// colormap lookup texture uLut over the display range [uLo, uHi] that core computed. Masked entries
// (uMask texel = 1) are drawn as grey diagonal hatching, never as a colour of the scale; NaN/Inf values
// are drawn black. Texture coordinates span the whole matrix: u along columns, v along rows.
in vec2 vUv;
in vec4 vColor;

uniform sampler2D uValues;   // R32F, cols × rows
uniform sampler2D uLut;      // RGB8, 256 × 1
uniform sampler2D uMask;     // R8 (normalised: 1 reads as 1/255), same size as uValues; read when uHasMask is 1
uniform int uHasMask;
uniform float uLo;
uniform float uHi;
uniform int uLog;            // 1: attn::ColorScale::Log (0 < uLo < uHi), as attn::normalize
uniform vec3 uMaskedColor;   // attn::kMaskedColor, normalised

out vec4 fragColor;

void main()
{
    float v = texture(uValues, vUv).r;
    vec3 rgb;
    if (uHasMask == 1 && texture(uMask, vUv).r > 0.5 / 255.0) {
        // 45° stripes, 6 px period in window pixels: reads as "not a value" at any zoom level.
        float stripe = mod(gl_FragCoord.x + gl_FragCoord.y, 6.0);
        rgb = stripe < 2.0 ? uMaskedColor * 0.75 : uMaskedColor;
    } else if (isnan(v) || isinf(v)) {
        rgb = vec3(0.0);
    } else {
        float t = uHi > uLo ? clamp((v - uLo) / (uHi - uLo), 0.0, 1.0) : 0.5;
        if (uLog == 1) t = v > uLo ? clamp(log(v / uLo) / log(uHi / uLo), 0.0, 1.0) : 0.0;
        // Sample texel centres: index = t·255, so t = 0 and t = 1 land on the first and last entries.
        float u = (t * 255.0 + 0.5) / 256.0;
        rgb = texture(uLut, vec2(u, 0.5)).rgb;
    }
    fragColor = vec4(rgb, 1.0) * vColor;
}
