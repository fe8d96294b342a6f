#version 330 core
// Heatmap quad: ImGui's vertex layout (ImDrawVert: pos, uv, packed colour), placed by an orthographic
// projection of ImGui's display rectangle. The renderer binds these three locations itself.
layout(location = 0) in vec2 aPos;
layout(location = 1) in vec2 aUv;
layout(location = 2) in vec4 aColor;

uniform mat4 uProjection;

out vec2 vUv;
out vec4 vColor;

void main()
{
    vUv = aUv;
    vColor = aColor;
    gl_Position = uProjection * vec4(aPos, 0.0, 1.0);
}
